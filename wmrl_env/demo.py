"""A tabular GRPO bandit with a hackable world model: the fusion methods side by side.

Each task has ``num_answers`` candidate answers with a true success probability; real
execution returns a noisy 0/1 outcome. The world model scores answers from a distorted view of
the truth and, on every task, over-scores a few *wrong* answers (an exploit a policy can
learn). A softmax policy per task is trained with group-relative advantages from each method;
the table reports its final true success and the real executions it paid for.

Example:
    >>> results = run_demo(steps=5, seeds=1, methods=("real", "wmrl"))
    >>> sorted(results), results["wmrl"].real_executions < results["real"].real_executions
    (['real', 'wmrl'], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from wmrl_env.fusion import METHODS, RewardFusion


@dataclass(frozen=True)
class BanditTasks:
    """True success probabilities ``p[task, answer]`` and the world model's view of them."""

    success: np.ndarray
    wm_view: np.ndarray  # noiseless world-model score per (task, answer)

    @classmethod
    def sample(
        cls,
        rng: np.random.Generator,
        num_tasks: int = 32,
        num_answers: int = 8,
        exploits_per_task: int = 1,
        exploit_score: float = 0.95,
    ) -> BanditTasks:
        success = rng.uniform(0.0, 0.3, size=(num_tasks, num_answers))
        best = rng.integers(num_answers, size=num_tasks)
        success[np.arange(num_tasks), best] = rng.uniform(0.85, 0.98, size=num_tasks)
        wm_view = 0.1 + 0.6 * success**2  # monotone, compressed and biased
        for task in range(num_tasks):
            wrong = np.flatnonzero(np.arange(num_answers) != best[task])
            hacked = rng.choice(wrong, size=exploits_per_task, replace=False)
            wm_view[task, hacked] = exploit_score  # confidently wrong
        return cls(success, wm_view)


class BanditTaskEnv(gym.Env[int, int]):
    """The bandit as a real env: one step, observe a task id, answer, get a
    Bernoulli(``success[task, answer]``) reward (what ``examples/`` train on).

    Example:
        >>> env = BanditTaskEnv(BanditTasks.sample(np.random.default_rng(0), 4, 3))
        >>> task, _ = env.reset(seed=0)
        >>> env.step(1)[2:4]
        (True, False)
    """

    def __init__(self, tasks: BanditTasks) -> None:
        self.tasks = tasks
        self.observation_space = gym.spaces.Discrete(tasks.success.shape[0])
        self.action_space = gym.spaces.Discrete(tasks.success.shape[1])

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.task = int(self.np_random.integers(self.tasks.success.shape[0]))
        return self.task, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        success = self.np_random.random() < self.tasks.success[self.task, int(action)]
        return self.task, float(success), True, False, {}


class HackableWorldModel:
    """The world model's view of each answer (exploits included), plus a little noise.

    Example:
        >>> tasks = BanditTasks.sample(np.random.default_rng(0), 4, 3)
        >>> HackableWorldModel(tasks, seed=0).predict([0, 1], [2, 2]).shape
        (2,)
    """

    def __init__(self, tasks: BanditTasks, seed: int, noise: float = 0.05) -> None:
        self.view = tasks.wm_view
        self.noise = noise
        self.rng = np.random.default_rng(seed)

    def predict(self, contexts: Sequence[int], answers: Sequence[int]) -> np.ndarray:
        scores = self.view[np.asarray(contexts), np.asarray(answers)]
        return scores + self.rng.normal(0.0, self.noise, size=scores.shape)


@dataclass(frozen=True)
class DemoResult:
    method: str
    true_success: float  # mean over seeds of the final policy's true success
    true_success_se: float
    real_executions: int  # per seed
    start_success: float
    wm_mse_raw: float  # world-model score vs true success, held-out trajectories, mean of steps
    wm_mse_calibrated: float


def _train(
    method: str,
    tasks: BanditTasks,
    rng: np.random.Generator,
    steps: int,
    num_groups: int,
    group_size: int,
    learning_rate: float,
    wm_noise: float,
) -> tuple[float, float, int, float, float]:
    num_tasks, num_answers = tasks.success.shape
    logits = np.zeros((num_tasks, num_answers))
    fusion = RewardFusion(method=method, anchor_fraction=0.1, seed=int(rng.integers(1 << 31)))
    group_ids = np.repeat(np.arange(num_groups), group_size)
    executions, raw_errors, calibrated_errors = 0, [], []

    def true_success() -> float:
        policy = np.exp(logits - logits.max(axis=1, keepdims=True))
        policy /= policy.sum(axis=1, keepdims=True)
        return float(np.mean(np.sum(policy * tasks.success, axis=1)))

    start = true_success()
    for _ in range(steps):
        task = rng.integers(num_tasks, size=num_groups)[group_ids]
        policy = np.exp(logits[task] - logits[task].max(axis=1, keepdims=True))
        policy /= policy.sum(axis=1, keepdims=True)
        answer = (policy.cumsum(axis=1) > rng.uniform(size=(task.size, 1))).argmax(axis=1)
        p = tasks.success[task, answer]
        wm = tasks.wm_view[task, answer] + rng.normal(0.0, wm_noise, size=task.size)
        anchors = fusion.select_anchors(group_ids)
        real = np.where(anchors, (rng.uniform(size=task.size) < p).astype(float), np.nan)
        executions += int(anchors.sum())
        out = fusion.step(group_ids, wm, real)
        held_out = ~anchors  # the map never saw these: an honest error
        if held_out.any() and method != "wm":
            raw_errors.append(np.mean((wm[held_out] - p[held_out]) ** 2))
            calibrated_errors.append(np.mean((out.calibrated[held_out] - p[held_out]) ** 2))
        gradient = -policy * out.advantages[:, None]
        gradient[np.arange(task.size), answer] += out.advantages
        np.add.at(logits, task, learning_rate * gradient / group_size)
    mse_raw = float(np.mean(raw_errors)) if raw_errors else float("nan")
    mse_cal = float(np.mean(calibrated_errors)) if calibrated_errors else float("nan")
    return true_success(), start, executions, mse_raw, mse_cal


def run_demo(
    steps: int = 300,
    seeds: int = 3,
    methods: Sequence[str] = METHODS,
    num_groups: int = 64,
    group_size: int = 8,
    learning_rate: float = 0.5,
    wm_noise: float = 0.05,
) -> dict[str, DemoResult]:
    """Train one policy per method and seed on the same tasks; summarise per method."""
    results = {}
    for method in methods:
        finals, starts, executions, raw, calibrated = [], [], [], [], []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            tasks = BanditTasks.sample(rng)
            final, start, count, mse_raw, mse_cal = _train(
                method, tasks, rng, steps, num_groups, group_size, learning_rate, wm_noise
            )
            finals.append(final)
            starts.append(start)
            executions.append(count)
            raw.append(mse_raw)
            calibrated.append(mse_cal)
        se = float(np.std(finals, ddof=1) / np.sqrt(seeds)) if seeds > 1 else float("nan")
        results[method] = DemoResult(
            method=method,
            true_success=float(np.mean(finals)),
            true_success_se=se,
            real_executions=int(np.mean(executions)),
            start_success=float(np.mean(starts)),
            wm_mse_raw=float(np.mean(raw)),
            wm_mse_calibrated=float(np.mean(calibrated)),
        )
    return results


def format_table(results: dict[str, DemoResult]) -> str:
    """A Markdown table of :func:`run_demo` results."""
    real = results.get("real")
    lines = [
        "| method | true success (start -> final) | real executions | share of `real` "
        "| wm MSE vs truth, raw -> calibrated (not executed) |",
        "|---|---|---|---|---|",
    ]
    for r in results.values():
        share = f"{r.real_executions / real.real_executions:.0%}" if real else "n/a"
        mse = (
            f"{r.wm_mse_raw:.3f} -> {r.wm_mse_calibrated:.3f}"
            if np.isfinite(r.wm_mse_raw)
            else "n/a"
        )
        lines.append(
            f"| {r.method} | {r.start_success:.3f} -> {r.true_success:.3f} "
            f"± {r.true_success_se:.3f} | {r.real_executions} | {share} | {mse} |"
        )
    return "\n".join(lines)
