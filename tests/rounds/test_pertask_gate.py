"""The per-task bench hands the fusion's gate each group's task: the tasks recur every
round, so the gate counts one cluster per task, not one per (round, task)."""

from __future__ import annotations

import numpy as np

from wmrl_env.testing.round_contract import RecordingFusion


def test_the_pertask_bench_passes_its_tasks_as_clusters(monkeypatch) -> None:
    from wmrl_env.bench import pertask
    from wmrl_env.bench.bank import TaskBank
    from wmrl_env.bench.pertask_config import PerTaskConfig
    from wmrl_env.bench.suite import sample_tasks, split_tasks
    from wmrl_env.bench.world_model import RandomWorldModel

    made: list[RecordingFusion] = []

    def recording(*args, **kwargs):
        made.append(RecordingFusion(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(pertask, "RewardFusion", recording)
    bank = TaskBank.of(sample_tasks(split_tasks("heldout"), 4))
    config = PerTaskConfig(rounds=3, group_size=4, anchor_fraction=0.5)
    pertask.run_arm(bank, config, "wmrl", 0, 1.0, RandomWorldModel(0))
    (fusion,) = made
    assert len(fusion.calls) == 3
    labels = set()
    for call in fusion.calls:
        clusters = call.get("clusters")
        assert clusters is not None, "the gate got no clusters"
        assert np.array_equal(np.asarray(clusters), call["group_ids"])  # the task itself
        labels |= set(np.asarray(clusters).tolist())
    assert labels == set(range(4))
    assert "wm_std" in fusion.calls[0]


def test_the_pertask_bench_screens_with_a_world_model_that_marks_no_validity() -> None:
    """A prediction without a ``valid`` mask is valid where finite: screening keeps
    ``execute_per_group`` members of each anchor task (it executed whole groups, reading
    every such prediction as NaN)."""
    from wmrl_env.bench import pertask
    from wmrl_env.bench.bank import TaskBank
    from wmrl_env.bench.pertask_config import PerTaskConfig
    from wmrl_env.bench.suite import sample_tasks, split_tasks
    from wmrl_env.bench.world_model import RandomWorldModel

    bank = TaskBank.of(sample_tasks(split_tasks("heldout"), 6))
    config = PerTaskConfig(rounds=4, group_size=4, anchor_fraction=0.3, execute_per_group=2)
    assert RandomWorldModel(0).predict(["t"], ["p"]).valid is None
    record = pertask.run_arm(bank, config, "wmrl", 0, 1.0, RandomWorldModel(0))
    spent = np.diff([step.real_executions for step in record.steps])
    anchored = np.array([step.n_anchor_groups for step in record.steps[1:]])
    assert anchored.min() >= 1
    assert spent.tolist() == (2 * anchored).tolist()


def test_the_pertask_bench_builds_the_gate_scope_it_is_given(monkeypatch) -> None:
    """``gate_scope="cluster"`` gives the fused arms one gate per task, each fed its own
    task's anchors (a per-cluster gate refuses a step without clusters, so a run that ends
    proves they reach it)."""
    from wmrl_env.bench import pertask
    from wmrl_env.bench.bank import TaskBank
    from wmrl_env.bench.pertask_config import PerTaskConfig
    from wmrl_env.bench.suite import sample_tasks, split_tasks
    from wmrl_env.bench.world_model import RandomWorldModel
    from wmrl_env.fusion.cluster_gate import ClusterGates

    made = []
    original = pertask.RewardFusion

    def keep(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    bank = TaskBank.of(sample_tasks(split_tasks("heldout"), 4))
    config = PerTaskConfig(rounds=6, group_size=4, anchor_fraction=0.5, gate_scope="cluster")
    monkeypatch.setattr(pertask, "RewardFusion", keep)
    pertask.run_arm(bank, config, "wmrl", 0, 1.0, RandomWorldModel(0))
    (fusion,) = made
    assert isinstance(fusion.gate, ClusterGates)
    assert fusion.gate.steps == 6
    assert 1 <= fusion.gate.num_clusters <= 4
    assert set(fusion.gate.gates) <= set(range(4))
