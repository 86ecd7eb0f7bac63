"""Groups started from real states of earlier real episodes (``WorldModelVectorEnv(
branch_starts=...)``): where they start, how long they play, that real members restore the
recorded state exactly, and what is refused."""

from __future__ import annotations

import numpy as np
import pytest
from testing_env import (
    BanditEnv,
    BanditWorldModel,
    CallLog,
    PointMassEnv,
    PointMassModel,
    SnapshotPointMassEnv,
)

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.env_executors.play import EnvJob, play
from wmrl_env.wrappers import BranchStarts, RealState
from wmrl_env.wrappers.shadows import AnchorShadow
from wmrl_env.wrappers.starts import GroupStarts

pytestmark = pytest.mark.filterwarnings("ignore:calibration falls back to identity")
M, G, T, H = 4, 2, 6, 2


def push(observations):
    """Away from 0 by 0.3 a step, member noise apart: no episode ends before T."""
    noise = 0.01 * np.arange(len(observations))[:, None]
    return (0.3 * np.sign(observations) + noise).astype(np.float32)


def make_envs(log=None, branch=None, **kwargs):
    return WorldModelVectorEnv(
        lambda: SnapshotPointMassEnv(log),
        PointMassModel(),
        num_groups=M,
        group_size=G,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0),
        executor="inline",
        max_episode_steps=T,
        branch_starts=branch if branch is not None else BranchStarts(groups=2, horizon=H),
        **kwargs,
    )


def play_round(envs, seed):
    obs, reset_info = envs.reset(seed=seed)
    start = obs.copy()
    while True:
        obs, _, terminated, truncated, info = envs.step(push(obs))
        if (terminated | truncated).all():
            return start[:, 0], reset_info, info


def test_first_round_is_fresh_then_branches_start_at_recorded_real_states():
    branch = BranchStarts(groups=2, horizon=H, seed=1)
    envs = make_envs(branch=branch)
    _, first, last = play_round(envs, seed=0)
    assert first["start_age"].tolist() == [0] * (M * G)
    assert last["episode_length"].tolist() == [T] * (M * G)
    recorded = branch.states
    # the point mass has no step limit of its own: every real step leaves a live episode
    assert len(recorded) == int(first["is_anchor"].sum()) * T
    assert sorted({s.age for s in recorded}) == list(range(1, T + 1))

    start, reset_info, info = play_round(envs, seed=1)
    ages = reset_info["start_age"].reshape(M, G)[:, 0]
    assert (ages[: M - 2] == 0).all() and (ages[M - 2 :] >= 1).all()
    drawable = {(round(float(s.observation[0]), 6), s.age) for s in recorded if s.age < T}
    for group in range(M - 2, M):
        x = round(float(start[group * G]), 6)
        assert (x, int(ages[group])) in drawable
    lengths = info["episode_length"].reshape(M, G)
    assert (lengths[: M - 2] == T).all()
    expected = np.minimum(H, T - ages[M - 2 :])
    assert (lengths[M - 2 :] == expected[:, None]).all()
    assert (info["start_age"].reshape(M, G)[:, 0] == ages).all()
    assert info["batch"]["start_mismatches"][0] == 0


def test_a_branched_anchor_plays_on_from_the_exact_recorded_state():
    log = CallLog()
    envs = make_envs(log=log, branch=BranchStarts(groups=M, horizon=H, seed=2))
    play_round(envs, seed=0)
    log.calls.clear()
    start, reset_info, info = play_round(envs, seed=5)
    anchors = np.flatnonzero(reset_info["is_anchor"])
    assert anchors.size and (reset_info["start_age"] >= 1).all()
    # the anchors step together: the first of the real steps are each anchor's first
    first_steps = log.of("step")[: anchors.size]
    assert sorted(round(c[1], 6) for c in first_steps) == sorted(
        round(float(start[i]), 6) for i in anchors
    )
    # a world-model member of an exact model imagines what the real env would have done
    wm = np.flatnonzero(~reset_info["is_anchor"])
    x, expected = start[wm].astype(np.float32), np.zeros(wm.size)
    obs = start[:, None].astype(np.float32)
    for _ in range(H):
        step = push(obs)
        x = np.clip(x + step[wm, 0], -10, 10)
        obs = obs + step
        expected += -np.abs(x)
    np.testing.assert_allclose(info["wm_score"][wm], expected, rtol=1e-5)


def test_states_older_than_the_step_limit_are_never_drawn_and_rounds_roll():
    starts = GroupStarts(np.arange(2), [np.zeros(1)] * 2, [{}, {}], [None, None], None)
    branch = BranchStarts(groups=1, horizon=3, keep_rounds=2, seed=0)
    branch.end_round([RealState(np.ones(1), "late", age=T)])
    assert branch.plan(starts, T).ages.tolist() == [0, 0]  # nothing drawable: all fresh
    branch.end_round([])  # a round that reached no state keeps the earlier ones
    assert len(branch.states) == 1
    for age in (1, 2):
        branch.end_round([RealState(np.full(1, age), f"s{age}", age=age)])
    assert {s.snapshot for s in branch.states} == {"s1", "s2"}  # keep_rounds=2
    plans = [branch.plan(starts, T) for _ in range(40)]
    assert {p.starts.snapshots[1] for p in plans} == {"s1", "s2"}
    assert all(p.horizons[1] == 3 and p.starts.snapshots[0] is None for p in plans)
    again = BranchStarts(groups=1, horizon=3, seed=0)
    again.end_round([RealState(np.ones(1), "x", age=T - 1)])
    assert again.plan(starts, T).horizons.tolist() == [T, 1]


def test_snapshot_after_is_taken_only_while_the_episode_goes_on():
    env = SnapshotPointMassEnv()
    away = {"x": np.float32([2.0]), "t": 0}
    job = EnvJob(actions=(np.float32([0.3]),) * 2, snapshot=away, snapshot_after=True)
    result, going = play(env, job, False)
    assert going and result.metadata["end_snapshot"]["t"] == 2
    np.testing.assert_array_equal(result.metadata["end_snapshot"]["x"], result.metadata[
        "observation"])  # fmt: skip
    near_zero = {"x": np.float32([0.05]), "t": 0}  # a step of 0 ends the episode there
    job = EnvJob(actions=(np.float32([0.0]),), snapshot=near_zero, snapshot_after=True)
    result, going = play(env, job, False)
    assert not going and "end_snapshot" not in result.metadata


def test_a_closed_shadow_stops_each_anchor_at_its_own_limit():
    shadow = AnchorShadow("closed", lambda obs: np.full_like(obs, 0.5), keep_noise=False)
    states = [np.array([[2.0]]), np.array([[2.0]])]
    actions = [np.array([[0.5]]), np.array([[0.5]])]
    scores = shadow.scores(PointMassModel(), states, actions, np.array([1, 3])).score
    np.testing.assert_allclose(scores, [-2.5, -2.5 - 3.0 - 3.5])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env_fn": PointMassEnv}, "get_snapshot / restore_snapshot"),
        ({"anchor_priority": "uncertainty", "imagination_policy": push}, "uniformly"),
        ({"branch_starts": BranchStarts(groups=M + 1, horizon=H)}, "num_groups"),
        ({"branch_starts": "half"}, "must be a BranchStarts"),
    ],
)
def test_refused_set_ups(kwargs, message):
    arguments = dict(
        env_fn=SnapshotPointMassEnv, world_model=PointMassModel(), num_groups=M, group_size=G,
        executor="inline", max_episode_steps=T,
        branch_starts=BranchStarts(groups=1, horizon=H),
    )  # fmt: skip
    with pytest.raises((ValueError, TypeError), match=message):
        WorldModelVectorEnv(**{**arguments, **kwargs})


def test_an_outcome_task_is_refused():
    with pytest.raises(ValueError, match="multi-step task"):
        WorldModelVectorEnv(
            lambda: BanditEnv(np.eye(2)),
            BanditWorldModel(np.eye(2)),
            num_groups=2,
            group_size=2,
            executor="inline",
            branch_starts=BranchStarts(groups=1, horizon=H),
        )


def test_bad_branch_arguments():
    with pytest.raises(ValueError, match=">= 1"):
        BranchStarts(groups=0, horizon=H)
    with pytest.raises(ValueError, match=">= 1"):
        BranchStarts(groups=1, horizon=0)
