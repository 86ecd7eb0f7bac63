"""The progress world model and its dense reward: labels, fit, calibrated std, co-evolution
on new episodes, the dense return, the fusion with sparse success; on real MuJoCo too."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.robotics.progress import (
    DenseProgressFusion,
    ProgressModel,
    demonstration_episodes,
    progress_increments,
    progress_labels,
    progress_returns,
)


def _walks(rng: np.random.Generator, n: int, dim: int = 3) -> list[tuple[np.ndarray, bool]]:
    """Episodes whose first feature walks to 1 (success) or stalls at 0.3-0.6 (failure); the
    other features are noise."""
    episodes = []
    for i in range(n):
        success = i % 2 == 0
        end = 1.0 if success else rng.uniform(0.3, 0.6)
        length = int(rng.integers(8, 16))
        states = rng.normal(scale=0.5, size=(length + 1, dim))
        states[:, 0] = np.linspace(0, end, length + 1) + 0.02 * rng.normal(size=length + 1)
        episodes.append((states, success))
    return episodes


def test_labels_and_bad_input() -> None:
    np.testing.assert_allclose(progress_labels(2, True), [0, 0.5, 1])
    np.testing.assert_allclose(progress_labels(2, False, failure_ceiling=0.4), [0, 0.2, 0.4])
    with pytest.raises(ValueError, match="at least one transition"):
        progress_labels(0, True)
    with pytest.raises(ValueError, match="failure_ceiling"):
        ProgressModel(failure_ceiling=1.0)
    model = ProgressModel()
    with pytest.raises(RuntimeError, match="not fitted"):
        model.predict(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="NaN"):
        model.pretrain([(np.array([[0.0], [np.nan]]), True)])
    with pytest.raises(ValueError, match=r"\(L \+ 1, dim\)"):
        model.pretrain([(np.zeros((1, 2)), True)])
    assert not model.fitted and not model.states  # nothing half-added


def test_predicts_progress_and_its_std_is_calibrated_on_held_out_states() -> None:
    rng = np.random.default_rng(0)
    model = ProgressModel(seed=0).pretrain(_walks(rng, 60))
    held_out = _walks(rng, 200)
    states = np.concatenate([s for s, _ in held_out])
    labels = np.concatenate([progress_labels(len(s) - 1, ok) for s, ok in held_out])
    mean, std = model.predict(states)
    assert ((mean >= 0) & (mean <= 1)).all() and (std > 0).all()
    assert np.corrcoef(mean, labels)[0, 1] > 0.9
    # the std is scaled to the out-of-bag error: held-out squared error / predicted variance
    # near 1 (about 3,000 states; their ratio's sampling error is a few per cent, the rest is
    # the out-of-bag estimate's own optimism/pessimism, so a factor 1.5 either way)
    ratio = np.mean((mean - labels) ** 2) / np.mean(std**2)
    assert 1 / 1.5 < ratio < 1.5, ratio
    check = model.check(held_out)  # the same figures, as the bench records them every round
    assert check["progress_rmse"] == pytest.approx(np.sqrt(np.mean((mean - labels) ** 2)))
    assert check["progress_std"] == pytest.approx(std.mean())
    assert check["progress_coverage"] == pytest.approx(np.mean(np.abs(mean - labels) <= std))
    assert 0.5 < check["progress_coverage"] < 0.95  # a calibrated std covers most, not all


def test_update_learns_the_new_episodes_states() -> None:
    """Co-evolution: states only the policy's own episodes visit are learnt after update."""
    rng = np.random.default_rng(1)
    model = ProgressModel(seed=0).pretrain(_walks(rng, 30))
    # the policy's episodes reach success through another feature (2), never seen before
    new = []
    for _ in range(30):
        states = np.zeros((11, 3))
        states[:, 2] = np.linspace(0, 4, 11)
        new.append((states, True))
    probe = np.array([[0.0, 0.0, 4.0]])
    before = model.predict(probe)[0][0]
    model.update(new)
    after = model.predict(probe)[0][0]
    assert before < 0.6 and after > 0.9, (before, after)
    assert len(model.states) == 60


def test_dense_return_is_the_sum_of_increments() -> None:
    rng = np.random.default_rng(2)
    model = ProgressModel(seed=0).pretrain(_walks(rng, 30))
    episodes = [s for s, _ in _walks(rng, 5)]
    returns = progress_returns(model, episodes)
    sums = [progress_increments(model, s).sum() for s in episodes]
    np.testing.assert_allclose(returns, sums, atol=1e-12)
    assert progress_returns(model, []).shape == (0,)


def test_fusion_ranks_failures_and_keeps_the_sparse_reward() -> None:
    groups = np.repeat(np.arange(4), 4)
    rng = np.random.default_rng(3)
    progress = rng.uniform(size=16)
    success = (progress > 0.7).astype(float)
    sparse = DenseProgressFusion(dense_weight=0.0).step(groups, progress, success)[0]
    np.testing.assert_array_equal(sparse, success)
    rewards, advantages = DenseProgressFusion(min_pairs=8).step(groups, progress, success)
    failures = success == 0
    # among failures the fused reward follows the progress (isotonic: never reversed)
    order = np.argsort(progress[failures])
    assert (np.diff(rewards[failures][order]) >= 0).all()
    np.testing.assert_allclose([advantages[groups == g].mean() for g in range(4)], 0, atol=1e-12)
    with pytest.raises(ValueError, match="one shape"):
        DenseProgressFusion().step(groups, progress[:3], success)
    with pytest.raises(ValueError, match="dense_weight"):
        DenseProgressFusion(dense_weight=1.5)


@pytest.mark.robosuite
def test_on_real_lift_the_expert_progresses_and_a_still_policy_does_not() -> None:
    pytest.importorskip("robosuite", reason="needs robosuite (pip install 'wmrl-env[robosuite]')")
    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.robotics.demonstrations import collect_demonstrations
    from wmrl_env.robotics.episodes import sampled_groups

    demos = collect_demonstrations("wmrl/Lift-v0", 8, noise=0.3, perturb_prob=0.03, horizon=60)
    episodes = demonstration_episodes(demos)
    assert len(episodes) == 8 and sum(ok for _, ok in episodes) >= 4
    model = ProgressModel(seed=0).pretrain(episodes[:6])
    held_out = [s for s, ok in episodes[6:] if ok]
    for states in held_out:  # a held-out successful expert episode climbs to near 1
        progress, _ = model.predict(states)
        assert progress[0] < 0.3 and progress[-1] > 0.7, progress[[0, -1]]

    class Still:  # a chunk policy that holds the arm still, gripper open
        instruction = ""

        def __call__(self, observations, instructions):
            chunk = np.zeros((len(observations), 8, 7), np.float32)
            chunk[..., 6] = -1.0
            return chunk

        def act(self, observations):
            return self(observations, [""]), None

    env = RobosuiteEnv("Lift", horizon=24, reward_shaping=False, terminate_on_success=True)
    try:
        still, groups = sampled_groups(Still(), env, seeds=[5, 6], group_size=1)
    finally:
        env.close()
    assert groups.tolist() == [0, 1] and [s.shape for s, _ in still] == [(4, 60)] * 2
    assert not any(ok for _, ok in still)
    assert (progress_returns(model, [s for s, _ in still]) < 0.2).all()
