"""``WorldModelVectorEnv(known_failure=...)``: an action known to fail without running it.

Before issue 23 its invalid prediction forced its whole group to the real env; now it scores
``failure_score`` unexecuted, its group stays a world-model group, and in a drawn anchor group
the other members alone run.
"""

from __future__ import annotations

import numpy as np
import pytest
from testing_env import BanditEnv, BanditWorldModel, CallLog

from wmrl_env import RewardFusion, WorldModelVectorEnv

PAYOFF = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.0, 0.1, 0.3], [0.4, 0.6, 0.0, 1.0]])
M, G = 8, 4
BROKEN = 3  # the action the world model cannot read and that certainly fails


def make_envs(log: CallLog, **kwargs) -> WorldModelVectorEnv:
    return WorldModelVectorEnv(
        lambda: BanditEnv(PAYOFF, log=log),
        BanditWorldModel(PAYOFF, scale=0.5, bias=0.2, invalid_actions=[BROKEN]),
        num_groups=M,
        group_size=G,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
        executor="inline",
        score_range=(0.0, 1.0),
        **kwargs,
    )


def test_a_known_failure_is_scored_unexecuted_and_forces_nothing() -> None:
    log = CallLog()
    envs = make_envs(log, known_failure=lambda action: int(action) == BROKEN)
    _, info = envs.reset(seed=0)
    planned = info["is_anchor"]
    model_env = int(np.flatnonzero(~planned)[0])  # in a world-model group
    anchor_env = int(np.flatnonzero(planned)[0])  # in a drawn anchor group
    actions = np.zeros(M * G, dtype=np.int64)
    actions[[model_env, anchor_env]] = BROKEN
    _, rewards, _, _, info = envs.step(actions)
    assert log.count("step") == planned.sum() - 1  # the drawn group's other members only
    assert info["batch"]["n_forced_anchor_groups"][0] == 0
    assert info["known_failure"][[model_env, anchor_env]].all()
    for env in (model_env, anchor_env):
        group = info["group_id"] == info["group_id"][env]
        assert rewards[env] == 0.0 and np.isnan(info["real_score"][env])
        assert info["advantage"][env] < info["advantage"][group].mean()
    assert not info["is_anchor"][info["group_id"] == info["group_id"][model_env]].any()
    envs.close()


def test_known_failure_needs_a_failure_score_and_an_outcome_task() -> None:
    with pytest.raises(ValueError, match="failure_score"):
        WorldModelVectorEnv(
            lambda: BanditEnv(PAYOFF),
            BanditWorldModel(PAYOFF),
            num_groups=2,
            group_size=2,
            executor="inline",
            known_failure=lambda action: False,
        )


def test_the_pre_gate_in_the_round_scores_its_answers_as_known_with_their_status() -> None:
    """With the deterministic pre-gate as ``known_failure``, a program that does not compile
    (and, with a submission file, one that runs no code) is never executed, scores the
    failure score, and its certain status reaches ``info["known_status"]``; the fusion counts
    it as known (``n_known``), never as a calibration pair."""
    from testing_env import TextTaskEnv, TextWorldModel

    from wmrl_env.sandboxes import PreGate

    log = CallLog()
    envs = WorldModelVectorEnv(
        lambda: TextTaskEnv(log=log),
        TextWorldModel(),
        num_groups=4,
        group_size=2,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0),
        executor="inline",
        score_range=(0.0, 1.0),
        known_failure=PreGate(submission="predictions.csv"),
    )
    _, info = envs.reset(seed=0)
    anchors = np.flatnonzero(info["is_anchor"])
    actions = ["cba"] * 8
    actions[anchors[0]] = "def f(:"
    actions[anchors[1]] = "# only a comment"
    _, rewards, _, _, info = envs.step(actions)
    assert log.count("step") == len(anchors) - 2
    assert info["known_failure"].tolist() == [i in anchors[:2] for i in range(8)]
    assert info["known_status"][anchors[0]] == "does_not_parse"
    assert info["known_status"][anchors[1]] == "invalid_output"
    assert set(info["known_status"][~info["known_failure"]]) == {""}
    assert (rewards[anchors[:2]] == 0.0).all() and np.isnan(info["real_score"][anchors[:2]]).all()
    assert info["batch"]["n_known"][0] == 2
    envs.close()


def test_a_plain_predicate_reports_failed_as_its_known_status() -> None:
    log = CallLog()
    envs = make_envs(log, known_failure=lambda action: int(action) == BROKEN)
    envs.reset(seed=0)
    actions = np.zeros(M * G, dtype=np.int64)
    actions[0] = BROKEN
    _, _, _, _, info = envs.step(actions)
    assert info["known_status"][0] == "failed" and set(info["known_status"][1:]) == {""}
    envs.close()
