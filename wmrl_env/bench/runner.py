"""Run the benchmark: GRPO on the ML task suite, once per arm and seed.

Each run trains a per-task softmax policy over the structured program space with
:func:`wmrl_env.grpo.train` on a :class:`~wmrl_env.WorldModelVectorEnv` whose fusion method is
the arm. Every few rounds the *greedy* policy (the most likely program per task) is scored by its
real execution result, not charged to the run (:func:`true_score_executor`): that is the
true score. Cost accounting
comes from the env's ``info``: real-execution seconds of the anchors, world-model seconds,
and the wall clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.bench.config import BenchConfig
from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.fusion import RewardFusion


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
        from wmrl_env.executors.cache import CachedExecutor

        sandbox = default_sandbox(max_workers=config.workers)
        Path(config.cache_dir).mkdir(parents=True, exist_ok=True)
        executor = CachedExecutor(sandbox, config.cache_dir, charge_hits=True)
    try:
        yield executor
    finally:
        executor.close()


@contextmanager
def true_score_executor(config: BenchConfig, executor: Any) -> Iterator[Any]:
    """What measures the greedy policy's true score: the committed table (each program's
    recorded real result, bit-identical to a live run on the same software) or, with
    ``true_score="live"`` or the replay executor, the runs' own ``executor``."""
    if config.true_score == "live" or config.executor == "replay":
        yield executor
        return
    table = _ml_tasks().load_table().replay_executor()
    try:
        yield table
    finally:
        table.close()


class TaskPolicy:
    """A softmax policy per task over the program space: a linear layer on a task one-hot.

    Wraps :class:`~wmrl_env.grpo.policies.CategoricalPolicy` (its ``act``, ``log_prob`` and
    ``parameters``) and adds :meth:`greedy`.
    """

    def __init__(self, descriptions: list[str], nvec: list[int], seed: int) -> None:
        import torch

        from wmrl_env.grpo.policies import CategoricalPolicy

        index = {d: i for i, d in enumerate(descriptions)}

        def encode(observations: Any) -> torch.Tensor:
            rows = [index[str(o)] for o in np.asarray(observations, dtype=object).ravel()]
            return torch.nn.functional.one_hot(torch.tensor(rows), len(index)).float()

        self.inner = CategoricalPolicy(len(index), nvec, encode, hidden=0, seed=seed)
        self.nvec = nvec

    def act(self, observations: Any):
        return self.inner.act(observations)

    def log_prob(self, observations: Any, actions: np.ndarray):
        return self.inner.log_prob(observations, actions)

    def parameters(self):
        return self.inner.parameters()

    def greedy(self, description: str) -> np.ndarray:
        """The most likely action for a task (dimensions are independent)."""
        import torch

        grid = np.stack(np.meshgrid(*[np.arange(n) for n in self.nvec], indexing="ij"), -1)
        actions = grid.reshape(-1, len(self.nvec))
        with torch.no_grad():
            log_probs = self.log_prob(np.array([description] * len(actions), dtype=object), actions)
        return actions[int(torch.argmax(log_probs))]


def evaluate(policy: TaskPolicy, env: Any, executor: Any, tasks: tuple[str, ...]) -> float:
    """Mean real normalised score of the greedy program over ``tasks`` (failures score 0)."""
    ml_tasks = _ml_tasks()
    jobs = [env.make_job(policy.greedy(ml_tasks.get_task(t).description), task_id=t) for t in tasks]
    results = executor.run(jobs)
    return float(np.mean([r.score if r.ok else 0.0 for r in results]))


def run_one(
    config: BenchConfig,
    arm: str,
    seed: int,
    world_model: Any,
    executor: Any,
    scorer: Any,
    on_step: Callable[[StepRecord], None] | None = None,
) -> RunRecord:
    """Train one policy with one fusion method; returns its step-by-step record.

    ``executor`` runs the anchors; ``scorer`` measures true scores (:func:`true_score_executor`).
    """
    from wmrl_env.grpo import GRPOConfig, train
    from wmrl_env.wrappers import WorldModelVectorEnv

    ml_tasks = _ml_tasks()
    tasks = config.tasks
    descriptions = [ml_tasks.get_task(t).description for t in tasks]
    nvec = [int(n) for n in ml_tasks.program_space().nvec]
    fusion = RewardFusion(method=arm, anchor_fraction=config.anchor_fraction, seed=seed)

    def make_env(executor: Any = executor):
        return ml_tasks.MLTaskEnv(tasks=tasks, executor=executor, action_mode="structured")

    envs = WorldModelVectorEnv(
        make_env,
        world_model,
        config.num_groups,
        config.group_size,
        fusion=fusion,
        update_world_model=arm != "real",  # the real arm trains on real scores alone
        executor="thread",
        num_workers=min(16, config.num_groups * config.group_size),
    )
    scorer_env = make_env(scorer)
    policy = TaskPolicy(descriptions, nvec, seed)
    record = RunRecord(arm=arm, seed=seed)
    start = time.perf_counter()
    totals = {"real_exec_seconds": 0.0, "wm_seconds": 0.0, "real_executions": 0}
    record.steps.append(StepRecord(step=0, true_score=evaluate(policy, scorer_env, scorer, tasks)))

    def log(row: dict[str, Any]) -> None:
        totals["real_exec_seconds"] += row["real_exec_seconds"]
        totals["wm_seconds"] += row["wm_seconds"]
        totals["real_executions"] += int(row["n_anchor_groups"]) * config.group_size
        step = row["iteration"] + 1
        evaluated = step % config.eval_every == 0 or step == config.iterations
        batch = row["fusion"]
        step_record = StepRecord(
            step=step,
            real_exec_seconds=totals["real_exec_seconds"],
            wall_seconds=time.perf_counter() - start,
            wm_seconds=totals["wm_seconds"],
            real_executions=totals["real_executions"],
            true_score=evaluate(policy, scorer_env, scorer, tasks) if evaluated else math.nan,
            fused_reward_mean=row["reward_mean"],
            real_reward_mean=row["real_reward_mean"],
            kappa=row["kappa"],
            spearman=_number(batch.get("spearman")),
            residual_mse=_number(batch.get("residual_mse")),
            anchor_gap=_number(batch.get("anchor_gap")),
            n_anchor_groups=int(row["n_anchor_groups"]),
            n_failed=int(row["n_failed"]),
            calibration_fallback=batch.get("calibration_fallback"),
        )
        record.steps.append(step_record)
        if on_step is not None:
            on_step(step_record)

    grpo = GRPOConfig(
        iterations=config.iterations,
        learning_rate=config.learning_rate,
        update_epochs=config.update_epochs,
        seed=seed,
    )
    try:
        train(envs, policy, grpo, log=log)
    finally:
        envs.close()
        scorer_env.close()
    if arm != "real" and arm != "wm":
        record.calibration = _calibration_snapshot(fusion)
    return record


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
