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
    """The task ids of ``split``; before the suite has a ``wm`` split, its train tasks."""
    from wmrl_env.envs.ml_tasks import registry

    try:
        return tuple(registry.task_ids(split))
    except ValueError:
        if split != "wm":
            raise
        return tuple(registry.task_ids("train"))


def table_training_pairs(tasks: Sequence[str]) -> tuple[list[str], list[str], np.ndarray]:
    """(description, program, score) of every committed table row of ``tasks``; a failed
    execution scores 0, the reward the environment gives it."""
    from wmrl_env.envs.ml_tasks import get_task, load_table

    wanted = set(tasks)
    rows = [row for row in load_table().rows if row.task_id in wanted]
    missing = wanted - {row.task_id for row in rows}
    if missing:
        raise ValueError(f"the execution table has no rows for tasks {sorted(missing)}")
    descriptions = [get_task(row.task_id).description for row in rows]
    programs = [row.program() for row in rows]
    scores = np.array([row.score if row.status == "ok" else 0.0 for row in rows])
    return descriptions, programs, scores


def pretrain_ml_world_model(tasks: Sequence[str], *, seed: int = 0) -> ProgramTaskWorldModel:
    """A new ML world model fitted on the table rows of ``tasks``."""
    from wmrl_env.envs.ml_tasks.features import TASK_FEATURE_NAMES, context_features

    model = ProgramTaskWorldModel(context_features, TASK_FEATURE_NAMES, seed=seed)
    return model.fit(*table_training_pairs(tasks))
