"""What the code policy reads and clones: a short task prompt, and (prompt, program) pairs.

:func:`task_prompt` states a task in one line from the suite's manifest (its id, kind,
metric, rows and features: what decides which program can run; a task of the second suite,
``hr_*`` or ``rd_*``, from its dataset alike); the world model still
reads the task's full description. :func:`bc_pairs` draws programs for every task of some
splits with :func:`~wmrl_env.code_policy.drafts.sample_draft` (the grid's programs and
recombinations of their pieces): the behaviour-cloning data.

Example:
    >>> task_prompt("wine")
    'Task wine: multiclass, metric accuracy, 178 rows, 13 features.\\nProgram:\\n'
    >>> pairs = bc_pairs(["wine", "diabetes"], per_task=3, seed=0)
    >>> len(pairs), pairs[0][0] == task_prompt("wine"), "Solution" in pairs[0][1].splitlines()[0]
    (6, True, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wmrl_env.code_policy.drafts import render_draft, sample_draft

__all__ = ["bc_pairs", "task_prompt"]


def task_prompt(task_id: str) -> str:
    """The one-line task statement the policy writes a program for (ends in ``Program:``)."""
    from wmrl_env.envs.ml_tasks.pool_tasks import is_private_test_id
    from wmrl_env.envs.ml_tasks.registry import manifest_entry

    if is_private_test_id(task_id):
        from wmrl_env.envs.ml_tasks.env import resolve_task

        task = resolve_task(task_id)
        kind, metric = task.kind, task.metric
        rows, features = len(task.dataset.y), task.dataset.X.shape[1]
    else:
        entry = manifest_entry(task_id)
        kind, metric = entry["kind"], entry["metric"]
        rows, features = entry["rows"], entry["encoded_features"]
    return f"Task {task_id}: {kind}, metric {metric}, {rows} rows, {features} features.\nProgram:\n"


def bc_pairs(
    task_ids: Sequence[str], per_task: int, seed: int = 0, grid_share: float = 0.5
) -> list[tuple[str, str]]:
    """``per_task`` (prompt, program) pairs for each task, programs drawn independently of
    the task's scores (the clone writes every kind of program, good and bad; GRPO sorts
    them out)."""
    from wmrl_env.envs.ml_tasks.registry import manifest_entry

    if per_task < 1:
        raise ValueError(f"per_task must be >= 1, got {per_task}")
    rng = np.random.default_rng(seed)
    pairs = []
    for task_id in task_ids:
        prompt, kind = task_prompt(task_id), manifest_entry(task_id)["kind"]
        for _ in range(per_task):
            pairs.append((prompt, render_draft(sample_draft(rng, kind, grid_share), kind)))
    return pairs
