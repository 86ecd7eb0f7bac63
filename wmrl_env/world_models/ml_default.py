"""The default world model for the ML task suite: pretrained, committed, one call to load.

:func:`load_default_ml_world_model` returns the committed
:class:`~wmrl_env.world_models.program_task.ProgramTaskWorldModel` (``pretrained/``), wired
to :func:`wmrl_env.envs.ml_tasks.features.context_features`: a context is a task's
description (or an ``MLTask``); the model finds the task it names and reads its train file.
:func:`pretrain_ml_world_model` rebuilds it from the committed execution table (what
``wmrl train-world-model --backend program --table-split SPLIT`` runs).

Example:
    >>> model = load_default_ml_world_model()
    >>> model.fitted, model.max_tasks
    (True, 64)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wmrl_env.world_models.program_task import ProgramTaskWorldModel

__all__ = [
    "DEFAULT_ARTIFACT",
    "load_default_ml_world_model",
    "pretrain_ml_world_model",
    "pretraining_tasks",
    "table_training_pairs",
]

DEFAULT_ARTIFACT = Path(__file__).parent / "pretrained" / "ml_program_task_v2.pkl"


def load_default_ml_world_model(path: str | Path | None = None) -> ProgramTaskWorldModel:
    """The pretrained ML world model (a fresh instance: no anchors yet)."""
    from wmrl_env.envs.ml_tasks.features import context_features

    path = Path(path) if path is not None else DEFAULT_ARTIFACT
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: build it with 'wmrl train-world-model --backend program "
            f"--table-split wm --out {path}'"
        )
    return ProgramTaskWorldModel.load(path, context_features)


def pretraining_tasks(split: str = "wm") -> tuple[str, ...]:
    """The tasks of ``split`` that the committed execution table holds (2 at least)."""
    from wmrl_env.envs.ml_tasks import load_table, registry

    in_table = set(load_table().task_ids)
    tasks = tuple(t for t in registry.task_ids(split) if t in in_table)
    if len(tasks) < 2:
        raise ValueError(
            f"the execution table holds {len(tasks)} tasks of split {split!r}: build them with "
            f"'wmrl build-tables --split {split}', or name the tasks to train on"
        )
    return tasks


def table_training_pairs(tasks: Sequence[str]) -> tuple[list[str], list[str], np.ndarray]:
    """(description, program, score) of every committed table row of ``tasks`` (tasks the
    table lacks are left out); a failed execution scores 0, the reward the environment
    gives it."""
    from wmrl_env.envs.ml_tasks import load_table

    rows = load_table().with_text(tasks)
    if len({row["task_id"] for row in rows}) < 2:
        raise ValueError(
            f"the execution table has rows for fewer than 2 of {len(set(tasks))} tasks"
        )
    descriptions = [row["description"] for row in rows]
    programs = [row["program"] for row in rows]
    scores = np.array([row["score"] if row["status"] == "ok" else 0.0 for row in rows])
    return descriptions, programs, scores


def pretrain_ml_world_model(tasks: Sequence[str], *, seed: int = 0) -> ProgramTaskWorldModel:
    """A new ML world model fitted on the table rows of ``tasks``."""
    from wmrl_env.envs.ml_tasks.features import TASK_FEATURE_NAMES, context_features

    model = ProgramTaskWorldModel(context_features, TASK_FEATURE_NAMES, seed=seed)
    return model.fit(*table_training_pairs(tasks))
