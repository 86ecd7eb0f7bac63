"""The TRL reward's anchor selection: uncertainty-driven draws and forced groups go through the
fusion, the one record of inclusion probabilities. The world model and executor here are
stand-ins (the real ones are exercised in tests/integrations/test_trl_reward.py)."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.fusion import RewardFusion, inclusion_probabilities, uncertainty_priorities

pytestmark = pytest.mark.trl
pytest.importorskip("trl", reason="the TRL integration needs trl")

PROMPTS = [f"task {i}" for i in range(8) for _ in range(4)]


class LengthModel:
    """Scores a completion by its length; unsure about prompts ending in an even digit;
    'garbage' gets NaN."""

    def predict(self, contexts, artifacts):
        scores = np.array([np.nan if a == "garbage" else len(a) / 10 for a in artifacts])
        std = np.array([0.5 if int(c[-1]) % 2 == 0 else 0.05 for c in contexts])
        return scores, std


class LengthExecutor:
    def run(self, jobs):
        return [
            ExecResult(job_id=str(i), status=ExecStatus.OK, score=len(job) / 12)
            for i, job in enumerate(jobs)
        ]


def test_uncertainty_driven_anchors_and_forced_groups_are_recorded_by_the_fusion() -> None:
    from wmrl_env.integrations.trl import WorldModelReward

    fusion = RewardFusion(method="ppi", anchor_fraction=0.25, seed=0)
    reward = WorldModelReward(
        LengthModel(),
        LengthExecutor(),
        lambda p, c: c,
        fusion=fusion,
        num_generations=4,
        anchor_priority="uncertainty",
    )
    completions = [f"{'x' * (i % 7)}" for i in range(32)]
    completions[29] = "garbage"  # group 7: forced
    reward(PROMPTS, completions)
    call = reward.last_call
    group_ids = np.repeat(np.arange(8), 4)
    priorities = uncertainty_priorities(group_ids, np.tile([0.5, 0.05], 4).repeat(4))
    pi = inclusion_probabilities(priorities[::4], 2, fusion.uniform_mix)
    inclusion = call.fusion.inclusion[::4]
    forced = np.arange(8) == 7
    assert call.is_anchor[28:].all() and inclusion[7] == 1.0
    drawn = call.is_anchor[::4] & ~forced
    np.testing.assert_allclose(inclusion[drawn], pi[drawn])
    assert np.isnan(inclusion[~call.is_anchor[::4]]).all()


def test_uncertainty_needs_a_world_model_with_a_std() -> None:
    from wmrl_env.integrations.trl import WorldModelReward

    class NoStd(LengthModel):
        def predict(self, contexts, artifacts):
            return super().predict(contexts, artifacts)[0]

    reward = WorldModelReward(
        NoStd(), LengthExecutor(), lambda p, c: c, num_generations=4, anchor_priority="uncertainty"
    )
    with pytest.raises(ValueError, match="std"):
        reward(PROMPTS, ["x"] * 32)
