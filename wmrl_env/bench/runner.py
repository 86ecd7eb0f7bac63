"""Run the benchmark: GRPO over the ML task suite, once per arm and seed.

Each run post-trains one task-conditioned policy (:class:`~wmrl_env.bench.policy.
TaskConditionedPolicy`) with :func:`wmrl_env.grpo.train` on a
:class:`~wmrl_env.WorldModelVectorEnv` over the suite's ``train`` split, whose fusion method
is the arm (``anchors``: the fused arms' share of groups, all executed). Every few rounds the
policy is scored on the ``heldout`` split from the execution table (:class:`Regime`), never
charged: that is the true score. Cost accounting comes from the env's ``info``: recorded
real-execution seconds of every real execution, world-model seconds, and the wall clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.bench.config import ANCHORS_ARM, BenchConfig
from wmrl_env.bench.policy import TaskConditionedPolicy
from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.bench.suite import ScoreTable, sample_tasks, split_tasks, task_features
from wmrl_env.fusion import RewardFusion
from wmrl_env.fusion.anchors import num_anchor_groups


def _ml_tasks():
    from wmrl_env.envs import ml_tasks

    return ml_tasks


@contextmanager
def real_executor(config: BenchConfig) -> Iterator[Any]:
    """The executor every run shares: the replay table, or the local sandbox behind a result
    cache whose hits are charged the seconds of their first run (honest accounting)."""
    ml_tasks = _ml_tasks()
    if config.executor == "replay":
        executor = ml_tasks.load_table().replay_executor()
    else:
        from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
        from wmrl_env.sandboxes.cache import CachedExecutor

        sandbox = default_sandbox(max_workers=config.workers, suite_programs=True)
        Path(config.cache_dir).mkdir(parents=True, exist_ok=True)
        executor = CachedExecutor(sandbox, config.cache_dir, charge_hits=True)
    try:
        yield executor
    finally:
        executor.close()


@dataclass(frozen=True)
class Regime:
    """What every run of a bench shares: the train tasks, every task's features (keyed by the
    description the env observes), and the held-out tasks' table scores and features."""

    train_tasks: tuple[str, ...]
    features: dict[str, np.ndarray]
    heldout: ScoreTable
    heldout_features: np.ndarray

    @classmethod
    def of_suite(cls, train_tasks: int = 0, heldout_tasks: int = 0) -> Regime:
        """The suite's ``train`` split to train on, its ``heldout`` split to score on (or
        fixed samples of that many tasks of each)."""
        train = sample_tasks(split_tasks("train"), train_tasks)
        heldout = sample_tasks(split_tasks("heldout"), heldout_tasks)
        ml_tasks = _ml_tasks()
        rows = task_features(train + heldout, reference=train)
        descriptions = [ml_tasks.get_task(t).description for t in train + heldout]
        return cls(
            train_tasks=train,
            features=dict(zip(descriptions, rows, strict=True)),
            heldout=ScoreTable.of(heldout),
            heldout_features=rows[len(train) :],
        )

    def score(self, policy: TaskConditionedPolicy, how: str) -> float:
        """The policy's held-out score ("greedy" or "expected"), from the table."""
        probabilities = policy.probabilities(self.heldout_features)
        return (
            self.heldout.greedy(probabilities)
            if how == "greedy"
            else self.heldout.expected(probabilities)
        )

    def greedy_programs(self, policy: TaskConditionedPolicy) -> dict[str, str]:
        """Held-out task -> the id of its most likely program."""
        picks = np.argmax(policy.probabilities(self.heldout_features), axis=1)
        programs = _ml_tasks().all_programs()
        return {t: programs[int(p)].id for t, p in zip(self.heldout.task_ids, picks, strict=True)}


def groups_per_round(config: BenchConfig, arm: str) -> int:
    """``num_groups``, or for the anchors arm the number of groups a fused arm executes."""
    if arm != ANCHORS_ARM:
        return config.num_groups
    return num_anchor_groups(config.num_groups, config.anchor_fraction, minimum=1)


def run_one(
    config: BenchConfig,
    arm: str,
    seed: int,
    world_model: Any,
    executor: Any,
    regime: Regime,
    on_step: Callable[[StepRecord], None] | None = None,
) -> RunRecord:
    """Train one task-conditioned policy on the train split with one arm; returns its record.

    ``executor`` runs the real executions (every one charged); the held-out score comes from
    the execution table (:class:`Regime`), never charged.
    """
    from wmrl_env.grpo import train
    from wmrl_env.wrappers import WorldModelVectorEnv

    ml_tasks = _ml_tasks()
    num_groups = groups_per_round(config, arm)
    method = "real" if arm == ANCHORS_ARM else arm
    fusion = RewardFusion(method=method, anchor_fraction=config.anchor_fraction, seed=seed)

    def make_env(executor: Any = executor):
        return ml_tasks.MLTaskEnv(
            tasks=regime.train_tasks, executor=executor, action_mode="structured"
        )

    envs = WorldModelVectorEnv(
        make_env,
        world_model,
        num_groups,
        config.group_size,
        fusion=fusion,
        update_world_model=method != "real",  # real and anchors learn from real scores alone
        anchor_priority="uncertainty" if config.uncertainty_anchors else "uniform",
        executor="thread",
        num_workers=min(16, num_groups * config.group_size),
    )
    policy = TaskConditionedPolicy(regime.features, hidden=config.hidden, seed=seed)
    record = RunRecord(arm=arm, seed=seed)
    start = time.perf_counter()
    totals = {"real_exec_seconds": 0.0, "wm_seconds": 0.0, "real_executions": 0}
    record.steps.append(StepRecord(step=0, true_score=regime.score(policy, config.heldout_score)))

    def log(row: dict[str, Any]) -> None:
        totals["real_exec_seconds"] += row["real_exec_seconds"]
        totals["wm_seconds"] += row["wm_seconds"]
        totals["real_executions"] += int(row["n_anchor_groups"]) * config.group_size
        step = row["iteration"] + 1
        evaluated = step % config.eval_every == 0 or step == config.iterations
        step_record = StepRecord(
            step=step,
            real_exec_seconds=totals["real_exec_seconds"],
            wall_seconds=time.perf_counter() - start,
            wm_seconds=totals["wm_seconds"],
            real_executions=totals["real_executions"],
            true_score=regime.score(policy, config.heldout_score) if evaluated else math.nan,
            **fusion_fields(row),
        )
        record.steps.append(step_record)
        if on_step is not None:
            on_step(step_record)

    grpo = grpo_config(config, seed)
    try:
        train(envs, policy, grpo, log=log)
    finally:
        envs.close()
    record.final_programs = regime.greedy_programs(policy)
    if method not in ("real", "wm"):
        record.calibration = _calibration_snapshot(fusion)
    return record


def grpo_config(config: Any, seed: int) -> Any:
    """The GRPO settings of a bench run: rounds, learning rate, epochs and optimizer (Adam
    where the configuration names none) from ``config`` (any bench configuration), the
    first reset seeded with ``seed``."""
    from wmrl_env.grpo import GRPOConfig

    return GRPOConfig(
        iterations=config.iterations,
        learning_rate=config.learning_rate,
        update_epochs=config.update_epochs,
        optimizer=getattr(config, "optimizer", "adam"),
        seed=seed,
    )


def fusion_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The fusion's diagnostics of a :func:`wmrl_env.grpo.train` log row, as
    :class:`StepRecord` fields."""
    batch = row["fusion"]
    return {
        "fused_reward_mean": row["reward_mean"],
        "real_reward_mean": row["real_reward_mean"],
        "kappa": row["kappa"],
        "spearman": _number(batch.get("spearman")),
        "residual_mse": _number(batch.get("residual_mse")),
        "anchor_gap": _number(batch.get("anchor_gap")),
        "wm_weight": _number(batch.get("wm_weight")),
        "n_anchor_groups": int(row["n_anchor_groups"]),
        "n_failed": int(row["n_failed"]),
        "calibration_fallback": batch.get("calibration_fallback"),
    }


def _calibration_snapshot(fusion: RewardFusion) -> dict[str, list[float]]:
    pair_wm, pair_real = fusion.calibrator.window_pairs()
    if pair_wm.size == 0:
        return {}
    grid = np.linspace(pair_wm.min(), pair_wm.max(), 200)
    return {
        "pair_wm": pair_wm.tolist(),
        "pair_real": pair_real.tolist(),
        "grid_wm": grid.tolist(),
        "grid_calibrated": fusion.calibrator.transform(grid).tolist(),
    }


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
