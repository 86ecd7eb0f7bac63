"""The multi-turn transfer check end to end at tiny sizes: every arm trains through
WorldModelVectorEnv, counts its real executions, and is scored for real and in simulation."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.bench.multiturn import TransferConfig, run_transfer, summary_rows
from wmrl_env.bench.revision_policy import RevisionPolicy
from wmrl_env.envs.ml_tasks import ProgramSpec
from wmrl_env.world_models import load_default_ml_world_model


@pytest.fixture(scope="module")
def results():
    config = TransferConfig(
        rounds=2, seeds=2, num_groups=4, group_size=2, anchor_fraction=0.25, max_turns=2,
        heldout_tasks=3, eval_episodes=1, eval_every=1,
    )  # fmt: skip
    return config, run_transfer(config, load_default_ml_world_model())


def test_every_arm_pays_for_exactly_its_real_executions(results) -> None:
    config, out = results
    per_round = {
        "real": config.num_groups * config.group_size,
        "anchors": config.anchor_groups * config.group_size,
        "wmrl": config.anchor_groups * config.group_size,
        "wm": 0,
    }
    for run in out["runs"]:
        for checkpoint in run["checkpoints"]:
            episodes = per_round[run["arm"]] * checkpoint["round"]
            # one execution per turn: between one and max_turns per real episode
            assert episodes <= checkpoint["real_executions"] <= episodes * config.max_turns


def test_scores_are_read_for_real_and_in_simulation(results) -> None:
    _, out = results
    rows = {row["arm"]: row for row in summary_rows(out)}
    assert set(rows) == {"real", "anchors", "wmrl", "wm"}
    for row in rows.values():
        real, sim = row["real_best"][0], row["sim_best"][0]
        assert 0.0 <= real <= 1.0 and 0.0 <= sim <= 1.0
        assert row["sim_minus_real"][0] == pytest.approx(sim - real)
    assert "gain_over_anchors" in rows["wmrl"] and "gain_over_anchors" not in rows["anchors"]


def test_a_policy_update_follows_the_advantage() -> None:
    """One REINFORCE step toward a sampled first program makes it likelier."""
    policy = RevisionPolicy()
    episode = policy.new_episode()
    spec = episode.act("Task iris: ...", np.random.default_rng(0))
    policy.params += 1.0 * episode.grad
    greedy = policy.new_episode(greedy=True).act("Task iris: ...", np.random.default_rng(1))
    assert greedy == spec and isinstance(spec, ProgramSpec)


def test_bad_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown arms"):
        TransferConfig(arms=("real", "magic"))
    with pytest.raises(ValueError, match="anchor_fraction"):
        TransferConfig(anchor_fraction=0.0)
    with pytest.raises(ValueError, match="suite"):
        TransferConfig(suite="second")
    from wmrl_env.bench.multiturn_lm import LMTransferConfig

    with pytest.raises(ValueError, match="suite"):
        LMTransferConfig(suite="second")


def test_the_script_resumes_only_a_log_made_the_same_way(tmp_path) -> None:
    """More seeds run only the missing ones; another config, world model or an unstamped log
    is refused with the log unchanged."""
    import importlib.util
    import json
    from pathlib import Path

    from wmrl_env.bench.multiturn import transfer_fingerprint
    from wmrl_env.bench.run_log import StaleRunLog

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "multiturn_transfer.py"
    spec = importlib.util.spec_from_file_location("mt_transfer", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    args = ["--rounds", "1", "--num-groups", "2", "--group-size", "2", "--max-turns", "2",
            "--heldout-tasks", "1", "--eval-episodes", "1", "--eval-every", "1",
            "--arms", "wm", "--out", str(tmp_path)]  # fmt: skip
    script.main([*args, "--seeds", "1"])
    log = tmp_path / "runs.jsonl"
    first = log.read_bytes()
    script.main([*args, "--seeds", "2"])
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert log.read_bytes().startswith(first) and [r["seed"] for r in rows] == [0, 1]
    kept = log.read_bytes()
    with pytest.raises(StaleRunLog, match=r"config\.rounds"):
        script.main([*args, "--rounds", "2"])
    with pytest.raises(StaleRunLog, match=r"another config\.suite, status_model, world_model"):
        script.main([*args, "--suite", "pool"])
    assert log.read_bytes() == kept
    config = TransferConfig(rounds=1, seeds=1)
    assert set(transfer_fingerprint(config, "v3")) == {
        "config", "package", "world_model", "status_model"
    }  # fmt: skip
    log.write_text(json.dumps({k: v for k, v in rows[0].items() if k != "made_with"}) + "\n")
    with pytest.raises(StaleRunLog, match="older log"):
        script.main([*args, "--seeds", "1"])
