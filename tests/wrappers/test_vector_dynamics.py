"""``WorldModelVectorEnv`` on multi-step tasks with a dynamics world model (``predict_step``)."""

from __future__ import annotations

import numpy as np
import pytest
from testing_env import CallLog, PointMassEnv, PointMassModel, SnapshotPointMassEnv

from wmrl_env import RewardFusion, WorldModelVectorEnv

M, G, T = 4, 3, 6
BIAS = 0.05


def make_envs(log=None, model=None, method="wmrl", env_class=PointMassEnv, **env_kwargs):
    return WorldModelVectorEnv(
        lambda: env_class(log=log, **env_kwargs),
        model or PointMassModel(reward_bias=BIAS),
        num_groups=M,
        group_size=G,
        fusion=RewardFusion(method=method, anchor_fraction=0.5, seed=0),
        executor="inline",
        max_episode_steps=T,
    )


def play_round(envs, seed=0, policy=None):
    """Play one round; the default policy pushes every member away from 0 (never terminates)."""
    obs, reset_info = envs.reset(seed=seed)
    steps = []
    while True:
        actions = policy(obs) if policy else (0.4 * np.sign(obs)).astype(np.float32)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        steps.append((obs, rewards, terminated, truncated, info))
        if (terminated | truncated).all():
            return reset_info, steps


def test_spaces_and_shapes() -> None:
    envs = make_envs()
    assert envs.kind == "dynamics"
    obs, info = envs.reset(seed=0)
    assert obs.shape == (M * G, 1) and obs.dtype == np.float32
    assert (obs.reshape(M, G) == obs.reshape(M, G)[:, :1]).all()
    obs, rewards, _terminated, _truncated, info = envs.step(np.zeros((M * G, 1), np.float32))
    assert obs.shape == (M * G, 1) and obs.dtype == np.float32
    assert rewards.shape == (M * G,) and (rewards == 0).all()
    assert info["active"].all() and not info["batch"]["round_done"][0]
    envs.close()


def test_round_ends_with_fused_rewards_and_raw_step_rewards_in_info() -> None:
    log = CallLog()
    envs = make_envs(log)
    reset_info, steps = play_round(envs)
    *middle, (_, rewards, terminated, truncated, info) = steps
    assert len(steps) == T and truncated.all() and not terminated.any()
    assert all((r == 0).all() for _, r, *_ in middle)
    np.testing.assert_array_equal(rewards, info["fused_reward"])
    anchors = reset_info["is_anchor"]
    assert info["batch"]["round_done"][0]
    real_steps = sum(s[4]["step_reward"][anchors].size for s in steps)
    assert log.count("step") == real_steps == anchors.sum() * T
    returns = sum(s[4]["step_reward"] for s in steps)
    np.testing.assert_allclose(info["real_score"][anchors], returns[anchors])
    np.testing.assert_allclose(info["wm_score"][~anchors], returns[~anchors])
    assert (info["episode_length"] == T).all()
    envs.close()


def test_anchor_wm_score_shadows_the_real_trajectory() -> None:
    """The model is exact up to a reward bias: along the same actions, wm = real + bias * steps."""
    envs = make_envs()
    reset_info, steps = play_round(envs)
    info = steps[-1][4]
    anchors = reset_info["is_anchor"]
    expected = info["real_score"] + BIAS * info["episode_length"]
    np.testing.assert_allclose(info["wm_score"][anchors], expected[anchors], atol=1e-5)
    envs.close()


def test_episodes_ending_early_wait_for_the_round() -> None:
    envs = make_envs()
    obs, _ = envs.reset(seed=1)
    first = np.clip(-obs, -1, 1).astype(np.float32)  # reaches 0 in one step where |x| <= 1
    obs, _, terminated, _, _ = envs.step(first)
    ended = terminated.copy()
    assert ended.any() and not ended.all()
    obs_after, _rewards, terminated, _truncated, info = envs.step(np.ones((M * G, 1), np.float32))
    assert not info["active"][ended].any() and terminated[ended].all()
    np.testing.assert_array_equal(obs_after[ended], obs[ended])  # actions ignored
    envs.close()


def test_snapshots_give_identical_group_starts() -> None:
    log = CallLog()
    envs = make_envs(log, env_class=SnapshotPointMassEnv)
    reset_info, steps = play_round(envs)
    anchors = np.flatnonzero(reset_info["is_anchor"])
    first_contexts = [c for _, c, _ in log.of("step")][: anchors.size]
    groups = anchors // G
    for group in set(groups.tolist()):
        assert len({c for c, g in zip(first_contexts, groups, strict=True) if g == group}) == 1
    assert steps[-1][4]["batch"]["start_mismatches"][0] == 0
    envs.close()


def test_unreproducible_reset_without_snapshots_is_flagged() -> None:
    envs = WorldModelVectorEnv(
        lambda: PointMassEnv(reproducible_reset=False),
        PointMassModel(),
        num_groups=2,
        group_size=2,
        fusion=RewardFusion(method="real", seed=0),
        executor="inline",
        max_episode_steps=2,
    )
    envs.reset(seed=0)
    with pytest.warns(RuntimeWarning, match="restore_snapshot"):
        envs.step(np.zeros((4, 1), np.float32))
    envs.close()


def test_real_failure_mid_episode_spares_the_others() -> None:
    envs = make_envs(method="real", fail_at_step=2)
    _, steps = play_round(envs)
    info = steps[-1][4]
    assert (info["exec_status"] == "error").all()  # every member hits step 2
    assert (info["episode_length"] == 3).all() and steps[-1][3].all()
    assert (info["advantage"] == 0).all()
    envs.close()


def test_invalid_model_prediction_replays_the_group_for_real() -> None:
    log = CallLog()
    envs = make_envs(log, model=PointMassModel(nan_below=-0.5), method="wm")
    _reset_info, steps = play_round(envs, policy=lambda obs: np.full_like(obs, -1.0))
    info = steps[-1][4]
    invalid = ~info["wm_valid"]
    assert invalid.any()
    replayed = np.isin(info["group_id"], info["group_id"][invalid])
    assert info["is_anchor"][replayed].all() and not info["is_anchor"][~replayed].any()
    assert (info["inclusion_probability"][replayed] == 1.0).all()
    assert np.isfinite(info["real_score"][replayed]).all()
    assert log.count("step") > 0
    envs.close()


def test_seeding_determinism() -> None:
    finals = []
    for _ in range(2):
        envs = make_envs()
        _, steps = play_round(envs, seed=4)
        finals.append(steps[-1][1])
        envs.close()
    np.testing.assert_array_equal(*finals)


def test_needs_box_observations_and_an_episode_limit() -> None:
    with pytest.raises(ValueError, match="max_episode_steps"):
        WorldModelVectorEnv(PointMassEnv, PointMassModel(), executor="inline")


def test_real_envs_kept_alive_are_bounded_by_one_rounds_anchors() -> None:
    created = []

    def env_fn():
        created.append(1)
        return PointMassEnv()

    envs = WorldModelVectorEnv(
        env_fn,
        PointMassModel(),
        num_groups=M,
        group_size=G,
        executor="inline",
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0),
        max_episode_steps=2,
    )
    for seed in range(6):
        play_round(envs, seed=seed)
    envs.close()
    anchor_members = (M // 2) * G
    assert len(created) <= anchor_members + 1  # one slot env per anchor member, one for resets
