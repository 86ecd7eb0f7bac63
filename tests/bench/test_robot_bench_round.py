"""The robot bench's rounds are the anchored-round engine's: every fusion step of a fused arm
is an :meth:`AnchoredRound.finish <wmrl_env.rounds.AnchoredRound.finish>` of a plan the
engine drew (the vector env's multi-step round, which the conformance suite checks)."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.bench.robotics.config import RobotBenchConfig
from wmrl_env.rounds import ROUND_METRICS, AnchoredRound

RECIPE = {"num_episodes": 2, "noise": 0.0, "perturb_prob": 0.0, "epochs": 5, "horizon": 64}


@pytest.mark.robosuite
def test_every_round_of_the_robot_bench_is_finished_by_the_engine(tmp_path, monkeypatch):
    from wmrl_env.bench.robotics import run_robot_bench
    from wmrl_env.fusion import RewardFusion

    finished, steps = [], []
    finish, step = AnchoredRound.finish, RewardFusion.step

    def spy_finish(self, plan, record, prediction, clusters=None):
        done = finish(self, plan, record, prediction, clusters)
        finished.append(done)
        return done

    def spy_step(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        steps.append(out)
        return out

    monkeypatch.setattr(AnchoredRound, "finish", spy_finish)
    monkeypatch.setattr(RewardFusion, "step", spy_step)
    config = RobotBenchConfig(
        arms=("ppi",), seeds=1, iterations=2, num_groups=2, group_size=2, anchor_fraction=0.5,
        eval_every=2, eval_starts=1, ensemble_size=2, hidden=16, recipe=RECIPE,
        cache_dir=str(tmp_path / "cache"), out=str(tmp_path / "out"),
    )  # fmt: skip
    result = run_robot_bench(config)
    (run,) = result.runs
    assert len(finished) == config.iterations == len(run.steps) - 1
    # no fusion step outside the engine
    assert len(steps) == len(finished)
    assert all(done.fusion is out for done, out in zip(finished, steps, strict=True))
    for done in finished:
        assert not set(ROUND_METRICS) - set(done.metrics)
        anchored = done.plan.anchors
        assert anchored.any() and np.all(done.plan.inclusion[anchored] > 0)
