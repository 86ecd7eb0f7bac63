"""Inputs for the ML world-model tests: real rows of the committed execution table."""

from __future__ import annotations

import numpy as np

from wmrl_env.envs.ml_tasks import get_task, load_table

HELDOUT = ("wine", "diabetes", "engel")


def table_inputs(n: int, tasks=HELDOUT) -> tuple[list[str], list[str], np.ndarray]:
    """``n`` (description, program, score) triples of ``tasks`` (every 7th row; a failed
    execution scores 0)."""
    rows = [row for task in tasks for row in load_table().for_task(task)][::7][:n]
    contexts = [get_task(row.task_id).description for row in rows]
    scores = np.array([row.score if row.status == "ok" else 0.0 for row in rows])
    return contexts, [row.program() for row in rows], scores
