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
