"""The second suite in the per-task bench: the pool table replayed, rewards on validation
scores, every reading on private-test scores.

:func:`pool_bank` reads a pool table (:mod:`~wmrl_env.envs.ml_tasks.pool`) into a
:class:`~wmrl_env.bench.bank.TaskBank`: per task, each pool program's validation score is
the reward (``scores``), its private-test score the deploy reading (``private``), both
normalised per task on their own rows (trivial baseline 0, the pool's best 1; a failed
execution 0), and its recorded seconds what an execution is charged. The policies choose
among the pool's programs only (the open space is larger; the world model, v4, reads any
program of it).

:func:`pool_lines` gives the reference lines, all read on private scores: the pool's best
program, the uniform policy, exhaustive validation search over the pool and random search
(each deploying its best-by-validation program), the best constant program (the program
with the best mean validation score over the pretraining tasks, :func:`pretraining_constant`;
without one, per task the best over the *other* tasks) and, given a world
model, its zero-shot pick and world-model-guided search (deploying its best-by-validation
program). :func:`noise_ceiling` is each task's within-task Spearman between validation and
private scores over its pool: how well even an exact model of the reward ranks what a user
deploys.

Example:
    >>> import numpy as np
    >>> bank = TaskBank(("a", "b"), ("", ""), (("p", "q", "r"),) * 2,
    ...                 scores=np.array([[1.0, 0.5, 0.0], [0.2, 1.0, 0.9]]),
    ...                 seconds=np.ones((2, 3)),
    ...                 private=np.array([[0.7, 1.0, 0.0], [0.0, 0.6, 1.0]]))
    >>> lines = pool_lines(bank, (3,))
    >>> lines["exhaustive validation search over the pool (3 executions)"].tolist()
    [0.7, 0.6]
    >>> lines["best constant program, chosen on the other tasks' validation scores"].tolist()
    [1.0, 0.0]
    >>> noise_ceiling(bank).round(3).tolist()
    [0.5, 0.5]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.bench.bank import TaskBank, greedy_scores
from wmrl_env.bench.search import random_search, world_model_search
from wmrl_env.fusion.calibration import spearman


def default_pool_table() -> Path:
    """The committed pool table of the generated tasks."""
    return _data_dir() / "pool_v2.jsonl"


def default_pool_tables() -> tuple[Path, ...]:
    """The committed pool tables the bench reads: the generated tasks', the real-data
    tasks' (the same programs)."""
    return (default_pool_table(), _data_dir() / "pool_real_v1.jsonl")


def _data_dir() -> Path:
    from wmrl_env.envs import ml_tasks

    return Path(ml_tasks.__file__).resolve().parent / "data"


def default_pretraining_table() -> Path:
    """The committed pool table of the world model's pretraining tasks (generated tasks of
    other seeds than the held-out ones)."""
    return _data_dir() / "pool_pretrain_v1.jsonl"


def pretraining_constant(bank: TaskBank, path: str | os.PathLike[str] | None = None) -> int:
    """The index, among ``bank``'s programs, of the one program with the best mean
    normalised validation score over the pretraining tasks at ``path`` (default:
    :func:`default_pretraining_table`), among the programs both hold: the constant program
    a user would pick before seeing any held-out task."""
    from wmrl_env.envs.ml_tasks.grammar import GrammarProgram
    from wmrl_env.envs.ml_tasks.pool import read_pool
    from wmrl_env.envs.ml_tasks.pool_report import normalised_scores

    rows = read_pool(Path(path) if path is not None else default_pretraining_table())
    by_task, programs, valid, _ = normalised_scores(rows)
    mean = np.mean([valid[t] for t in by_task], axis=0)
    where = {_choice_key(GrammarProgram.from_id(p).choices): i for i, p in enumerate(programs)}
    shared = [(p, where[_choice_key(c)]) for p, c in enumerate(bank.choices)
              if _choice_key(c) in where]  # fmt: skip
    if not shared:
        raise ValueError("the bank and the pretraining table share no program")
    return max(shared, key=lambda pair: mean[pair[1]])[0]


def _choice_key(choices: Any) -> str:
    return repr(sorted(choices.items()))


def pool_bank(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    task_ids: Sequence[str] | None = None,
) -> TaskBank:
    """The pool table(s) at ``path`` (default: the committed ones,
    :func:`default_pool_tables`) as a bank: the programs every task holds, on ``task_ids``
    (default: every task of the tables, sorted)."""
    from wmrl_env.envs.ml_tasks.grammar import GrammarProgram
    from wmrl_env.envs.ml_tasks.pool import read_pool
    from wmrl_env.envs.ml_tasks.pool_report import normalised_scores
    from wmrl_env.envs.ml_tasks.pool_tasks import private_test_task

    if path is None:
        paths: tuple[Path, ...] = default_pool_tables()
    elif isinstance(path, (str, os.PathLike)):
        paths = (Path(path),)
    else:
        paths = tuple(Path(p) for p in path)
    where = ", ".join(str(p) for p in paths)
    rows = [row for p in paths for row in read_pool(p)]
    if not rows:
        raise ValueError(
            f"{where}: no pool table rows (build one with wmrl_env.envs.ml_tasks.pool)"
        )
    by_task, programs, valid, private = normalised_scores(rows)
    task_ids = tuple(sorted(by_task)) if task_ids is None else tuple(task_ids)
    unknown = [t for t in task_ids if t not in by_task]
    if unknown:
        raise ValueError(f"tasks {unknown} are not in the pool tables {where}")
    grammar = [GrammarProgram.from_id(p) for p in programs]
    tasks = [private_test_task(t) for t in task_ids]
    return TaskBank(
        task_ids=task_ids,
        descriptions=tuple(task.description for task in tasks),
        texts=tuple(tuple(g.render(task.kind) for g in grammar) for task in tasks),
        scores=np.array([valid[t] for t in task_ids]),
        seconds=np.array(
            [[float(by_task[t][p]["exec_seconds"]) for p in programs] for t in task_ids]
        ),
        choices=tuple(g.choices for g in grammar),
        private=np.array([private[t] for t in task_ids]),
    )


def pool_lines(
    bank: TaskBank,
    budgets: Sequence[int],
    seeds: int = 2000,
    world_model: Callable[[int], Any] | None = None,
    search_seeds: int = 1,
    constant: int | None = None,
) -> dict[str, np.ndarray]:
    """Line name -> per-task private scores (see the module doc); random search is the mean
    over ``seeds`` draws of ``B`` distinct programs per task; ``world_model`` (seed -> a
    fresh world model) adds its zero-shot pick and its search (``search_seeds`` runs);
    ``constant`` is the best constant program's index when chosen elsewhere (e.g.
    :func:`pretraining_constant`)."""
    if bank.private is None:
        raise ValueError("the pool's reference lines need the bank's private scores")
    valid, private = bank.scores, bank.private
    rows = np.arange(bank.num_tasks)
    if constant is None:
        constant_name = "best constant program, chosen on the other tasks' validation scores"
        picks = [int(np.argmax(np.delete(valid, t, axis=0).mean(axis=0))) if len(valid) > 1
                 else 0 for t in rows]  # fmt: skip
    else:
        constant_name = "best constant program, chosen on the pretraining tasks' validation scores"
        picks = [constant] * bank.num_tasks
    lines = {
        "pool's best program (the pool's, not the space's)": private.max(axis=1),
        "uniform policy (expected) = untrained policy, ties at random": private.mean(axis=1),
        f"exhaustive validation search over the pool ({bank.num_programs} executions)": (
            private[rows, valid.argmax(axis=1)]
        ),
        constant_name: private[rows, picks],
    }
    for budget, values in random_search(valid, budgets, seeds=seeds, deploy=private).items():
        lines[f"random search@{budget}"] = values
    if world_model is not None:
        zero_shot = bank.predict_all(world_model(0)).scores.reshape(valid.shape)
        lines["world model's zero-shot pick"] = greedy_scores(zero_shot, private)
        found = world_model_search(bank, world_model, budgets, search_seeds, deploy=private)
        for budget, values in found.items():
            lines[f"world-model search@{budget}"] = values
    return lines


def noise_ceiling(bank: TaskBank) -> np.ndarray:
    """Per task, the Spearman correlation of the pool's validation and private scores (NaN
    where either is constant)."""
    if bank.private is None:
        raise ValueError("the noise ceiling needs the bank's private scores")
    return np.array([spearman(v, p) for v, p in zip(bank.scores, bank.private, strict=True)])
