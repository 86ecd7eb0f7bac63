"""The per-task regime's reference lines: what no learning, a constant, the world model
alone and plain search score on the held-out tasks, at the same budgets as the arms.

* ``oracle``: each task's best program (what exhaustive search finds, at 72 executions);
* ``uniform``: the expected score of a uniformly random program (= the untrained policy's
  greedy score, ties broken at random);
* ``best constant``: the one program with the best mean score on the ``train`` split;
* ``zero-shot pick``: the world model's top program per task, before any anchor;
* ``random search``: the best of ``B`` distinct programs drawn uniformly per task;
* ``world-model search``: per task, execute the unexecuted program with the highest
  ``mean + exploration * std`` of the world model, teach it the real score, repeat; the
  best executed program after ``B`` executions.

Search lines return per-task scores (seeds averaged) so they can be bootstrapped like arms.

Example:
    >>> scores = np.array([[0.0, 0.5, 1.0], [1.0, 0.0, 0.0]])
    >>> random_search(scores, (1, 3), seeds=2000, seed=0)[3].tolist()
    [1.0, 1.0]
    >>> bool(abs(random_search(scores, (1,), seeds=2000, seed=0)[1].mean() - 0.4167) < 0.02)
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from wmrl_env.bench.bank import TaskBank, greedy_scores


def random_search(
    scores: np.ndarray,
    budgets: Sequence[int],
    seeds: int,
    seed: int = 0,
    deploy: np.ndarray | None = None,
) -> dict[int, np.ndarray]:
    """Budget -> per task, the mean over ``seeds`` draws of the best of ``budget`` distinct
    uniformly drawn programs: its ``deploy`` score (e.g. on a private test) when given, the
    program chosen by ``scores`` (the first drawn of equal scores)."""
    rng = np.random.default_rng(seed)
    num_tasks, num_programs = scores.shape
    rows = np.arange(num_tasks)
    totals = {b: np.zeros(num_tasks) for b in budgets}
    for _ in range(seeds):
        order = np.argsort(rng.uniform(size=(num_tasks, num_programs)), axis=1)
        drawn = np.take_along_axis(scores, order, axis=1)
        if deploy is None:
            running = np.maximum.accumulate(drawn, axis=1)
            for b in budgets:
                totals[b] += running[:, min(b, num_programs) - 1]
            continue
        deployed = np.take_along_axis(deploy, order, axis=1)
        for b in budgets:
            totals[b] += deployed[rows, drawn[:, : min(b, num_programs)].argmax(axis=1)]
    return {b: totals[b] / seeds for b in budgets}


def world_model_search(
    bank: TaskBank,
    make_world_model: Callable[[int], Any],
    budgets: Sequence[int],
    seeds: int,
    exploration: float = 1.0,
    deploy: np.ndarray | None = None,
) -> dict[int, np.ndarray]:
    """Budget -> per task, the best executed program's score (mean over ``seeds`` world
    models) when every task executes its highest ``mean + exploration * std`` unexecuted
    program, one at a time, the world model learning each real score (ties at random);
    with ``deploy`` (e.g. private scores), the deploy score of the best executed program
    by score (the first executed of equal scores)."""
    horizon = min(max(budgets), bank.num_programs)
    totals = {b: np.zeros(bank.num_tasks) for b in budgets}
    tasks = np.arange(bank.num_tasks)
    for seed in range(seeds):
        model = make_world_model(seed)
        rng = np.random.default_rng([seed, 11])
        executed = np.zeros(bank.scores.shape, dtype=bool)
        best = np.full(bank.num_tasks, -np.inf)
        deployed = np.full(bank.num_tasks, -np.inf)
        for step in range(1, horizon + 1):
            prediction = bank.predict_all(model)
            std = np.zeros(prediction.scores.shape) if prediction.std is None else prediction.std
            value = (prediction.scores + exploration * np.nan_to_num(std)).reshape(
                bank.scores.shape
            )
            value = np.where(executed, -np.inf, value + 1e-9 * rng.uniform(size=value.shape))
            picks = value.argmax(axis=1)
            executed[tasks, picks] = True
            reward = bank.scores[tasks, picks]
            if deploy is not None:
                deployed = np.where(reward > best, deploy[tasks, picks], deployed)
            best = np.maximum(best, reward)
            bank.learn(model, tasks, picks)
            for b in budgets:
                if min(b, bank.num_programs) == step:
                    totals[b] += best if deploy is None else deployed
    return {b: totals[b] / seeds for b in budgets}


def reference_lines(
    bank: TaskBank,
    make_world_model: Callable[[int], Any],
    budgets: Sequence[int],
    train_scores: np.ndarray,
    seeds: int = 3,
) -> dict[str, np.ndarray]:
    """Line name -> per-task scores: the fixed lines and each search line at each budget
    (``"random search@8"``, ``"world-model search@8"``, ...)."""
    scores = bank.scores
    constant = int(np.argmax(train_scores.mean(axis=0)))
    zero_shot = bank.predict_all(make_world_model(0)).scores.reshape(scores.shape)
    lines = {
        "oracle (exhaustive search, 72 executions)": scores.max(axis=1),
        "uniform policy (expected) = untrained policy, ties at random": scores.mean(axis=1),
        "best constant program, chosen on train": scores[:, constant],
        "world model's zero-shot pick": greedy_scores(zero_shot, scores),
    }
    for budget, values in random_search(scores, budgets, seeds=200).items():
        lines[f"random search@{budget}"] = values
    for budget, values in world_model_search(bank, make_world_model, budgets, seeds).items():
        lines[f"world-model search@{budget}"] = values
    return lines
