"""``WorldModelVectorEnv`` remembers the best artifact executed per group context and
reports it in ``info`` (what one would deploy), across rounds."""

from __future__ import annotations

import math

import numpy as np
from testing_env import BanditEnv, BanditWorldModel

from wmrl_env import RewardFusion, WorldModelVectorEnv

PAYOFF = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.0, 0.1, 0.3], [0.4, 0.6, 0.0, 1.0]])


def test_best_executed_artifact_per_context_across_rounds() -> None:
    envs = WorldModelVectorEnv(
        lambda: BanditEnv(PAYOFF),
        BanditWorldModel(PAYOFF, scale=0.5),
        num_groups=6,
        group_size=4,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0),
        executor="inline",
    )
    rng = np.random.default_rng(0)
    seen: dict[int, float] = {}  # context -> best real score executed so far, by hand
    try:
        for round_seed in range(4):
            observations, _ = envs.reset(seed=round_seed)
            actions = rng.integers(4, size=envs.num_envs)
            _, _, _, _, info = envs.step(actions)
            for context, score in zip(observations, info["real_score"], strict=True):
                if np.isfinite(score):
                    seen[int(context)] = max(seen.get(int(context), -1.0), float(score))
            for i, context in enumerate(observations):
                expected = seen.get(int(context), math.nan)
                got = info["best_executed_score"][i]
                assert (math.isnan(expected) and math.isnan(got)) or got == expected
                action = info["best_executed_action"][i]
                if not math.isnan(expected):  # the action that scored it, on that context
                    assert PAYOFF[int(context), int(action)] == expected
                else:
                    assert action is None
        assert info["_best_executed_score"].all()
        assert {k: v[0] for k, v in envs.best_executed.items()} == seen
        assert len(seen) >= 2 and not all(info["is_anchor"])
    finally:
        envs.close()
