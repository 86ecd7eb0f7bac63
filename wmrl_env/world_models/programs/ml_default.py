"""The default world model for the ML task suite: pretrained, committed, one call to load.

:func:`load_default_ml_world_model` returns world model v3, the committed
:class:`~wmrl_env.world_models.programs.program_profile.ProgramProfileWorldModel`
(``pretrained/ml_program_profile_v3.npz``, pretrained on the ``wm`` and ``train`` splits:
for any task outside them, i.e. the ``heldout`` split and a user's own tasks);
:func:`load_ml_world_model` loads v2
(:class:`~wmrl_env.world_models.programs.program_task.ProgramTaskWorldModel`, pretrained on ``wm``
alone: what ``wmrl bench`` uses, since it trains its policy on ``train`` tasks) or v3 by
name. Both
are wired to :func:`wmrl_env.envs.ml_tasks.features.context_features`: a context is a
task's description (or an ``MLTask``); the model finds the task it names and reads its
train file. :func:`pretrain_ml_world_model` rebuilds either from the committed execution
table (what ``wmrl train-world-model --backend profile --table-split wm,train`` runs).

Example:
    >>> model = load_default_ml_world_model()
    >>> type(model).__name__, model.fitted, type(load_ml_world_model("v2")).__name__
    ('ProgramProfileWorldModel', True, 'ProgramTaskWorldModel')
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.sandboxes.pregate import PreGate
from wmrl_env.world_models.programs.program_profile import ProgramProfileWorldModel
from wmrl_env.world_models.programs.program_task import ProgramTaskWorldModel
from wmrl_env.world_models.programs.status_model import StatusModel, status_label

__all__ = [
    "ARTIFACTS",
    "DEFAULT_ARTIFACT",
    "OPEN_SPACE_ARTIFACTS",
    "PRETRAINING_SPLITS",
    "STATUS_ARTIFACTS",
    "VERSIONS",
    "load_default_ml_world_model",
    "load_ml_world_model",
    "ml_pre_gate",
    "ml_program_grid",
    "new_ml_world_model",
    "pretrain_ml_status_model",
    "pretrain_ml_world_model",
    "pretraining_tasks",
    "table_training_pairs",
    "world_model_files",
]

_PRETRAINED = Path(__file__).parent / "pretrained"
ARTIFACTS = {
    "v2": _PRETRAINED / "ml_program_task_v2.npz",
    "v3": _PRETRAINED / "ml_program_profile_v3.npz",
}
"""The committed pretrained ML world models, by version."""
DEFAULT_ARTIFACT = ARTIFACTS["v3"]
STATUS_ARTIFACTS = {version: _PRETRAINED / f"ml_status_{version}.npz" for version in ARTIFACTS}
"""The committed status models (how a run ends), one per version, each learned from the
execution table's statuses on that version's pretraining splits."""
OPEN_SPACE_ARTIFACTS = {"v4": _PRETRAINED / "ml_open_v4.npz"}
"""World model v4 (:class:`~wmrl_env.world_models.programs.open_space.OpenSpaceWorldModel`):
reads any program of the second suite's open space, pretrained on the generated tasks'
pretraining table (seeds 1 and 2; never the held-out ``_s0`` tasks) and the first suite's
real datasets of its ``wm`` and ``train`` splits (never an ``rd_`` task), status model
inside."""
VERSIONS: tuple[str, ...] = (*ARTIFACTS, *OPEN_SPACE_ARTIFACTS)
"""Every ML world model loadable by name."""
_BUILD = {
    "v4": "python -m wmrl_env.world_models.programs.open_space_build --out {path}",
    "v2": "wmrl train-world-model --backend program --table-split wm --out {path}",
    "v3": "wmrl train-world-model --backend profile --table-split wm,train --out {path}",
}
PRETRAINING_SPLITS = {"v2": "wm", "v3": "wm,train"}
"""The suite's splits each committed artifact was pretrained on: a world model must not
reward a policy on tasks whose real scores it was fitted on (``wmrl bench`` trains on
``train`` tasks, so it uses v2)."""


def load_ml_world_model(version: str = "v3", path: str | Path | None = None) -> Any:
    """The pretrained ML world model ``version`` (``"v2"``, ``"v3"`` or ``"v4"``; a fresh
    instance: no anchors yet), from ``path`` or the committed artifact."""
    from wmrl_env.envs.ml_tasks.features import context_features

    if version not in VERSIONS:
        raise ValueError(f"version must be one of {list(VERSIONS)}, got {version!r}")
    artifacts = {**ARTIFACTS, **OPEN_SPACE_ARTIFACTS}
    path = Path(path) if path is not None else artifacts[version]
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: build it with '{_BUILD[version].format(path=path)}'"
        )
    if version in OPEN_SPACE_ARTIFACTS:
        from wmrl_env.world_models.programs.open_space import OpenSpaceWorldModel

        model = OpenSpaceWorldModel.load(path)
        model.pre_gate = ml_pre_gate()
        return model
    cls = ProgramProfileWorldModel if version == "v3" else ProgramTaskWorldModel
    model = cls.load(path, context_features)
    status = STATUS_ARTIFACTS[version]
    if status.is_file():
        model.status_model = StatusModel.load(status)
    model.pre_gate = ml_pre_gate()
    return model


def world_model_files(version: str = "v3") -> dict[str, Path]:
    """The committed files :func:`load_ml_world_model` reads for ``version``: its artifact
    (``"world_model"``) and, for v2 and v3 where it exists, the status model beside it
    (``"status_model"``)."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {list(VERSIONS)}, got {version!r}")
    files = {"world_model": {**ARTIFACTS, **OPEN_SPACE_ARTIFACTS}[version]}
    status = STATUS_ARTIFACTS.get(version)
    if status is not None and status.is_file():
        files["status_model"] = status
    return files


def ml_pre_gate() -> PreGate:
    """The pre-gate of the ML suite: a program must write ``predictions.csv``; programs that
    differ only in comment or blank lines share an answer."""
    from wmrl_env.envs.ml_tasks.scoring import PREDICTIONS_FILE
    from wmrl_env.world_models.programs.program_features import code_key

    return PreGate(submission=PREDICTIONS_FILE, cache_key=code_key)


def load_default_ml_world_model(path: str | Path | None = None) -> ProgramProfileWorldModel:
    """The default pretrained ML world model, v3 (a fresh instance: no anchors yet)."""
    return load_ml_world_model("v3", path)


def ml_program_grid() -> tuple[dict[str, list[str]], dict[str, tuple[str, str, str]]]:
    """The suite's 72 structured programs as v3's grid: id -> its text for each task kind,
    and id -> (preprocessing, model, capacity)."""
    from wmrl_env.envs.ml_tasks.programs import all_programs, render_program

    kinds = ("binary", "multiclass", "regression")
    specs = all_programs()
    grid = {spec.id: [render_program(spec, kind) for kind in kinds] for spec in specs}
    attributes = {spec.id: (spec.preprocessing, spec.model, spec.capacity) for spec in specs}
    return grid, attributes


def pretraining_tasks(split: str = "wm") -> tuple[str, ...]:
    """The tasks of ``split`` (or of comma-separated splits, ``"wm,train"``) that the
    committed execution table holds (2 at least)."""
    from wmrl_env.envs.ml_tasks import load_table, registry

    in_table = set(load_table().task_ids)
    tasks = tuple(
        t for part in split.split(",") for t in registry.task_ids(part.strip()) if t in in_table
    )
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


def new_ml_world_model(
    version: str = "v3", *, score_range: tuple[float, float] = (0.0, 1.0), seed: int = 0
) -> Any:
    """An unfitted ML world model ``version`` wired to the suite's task features."""
    from wmrl_env.envs.ml_tasks.features import TASK_FEATURE_NAMES, context_features

    kwargs = {"score_range": score_range, "seed": seed}
    if version == "v2":
        return ProgramTaskWorldModel(context_features, TASK_FEATURE_NAMES, **kwargs)
    if version == "v3":
        grid, attributes = ml_program_grid()
        return ProgramProfileWorldModel(
            context_features, TASK_FEATURE_NAMES, grid, attributes, **kwargs
        )
    raise ValueError(f"version must be 'v2' or 'v3', got {version!r}")


def pretrain_ml_world_model(
    tasks: Sequence[str], *, version: str = "v3", seed: int = 0
) -> ProgramTaskWorldModel | ProgramProfileWorldModel:
    """A new ML world model ``version`` fitted on the table rows of ``tasks``."""
    return new_ml_world_model(version, seed=seed).fit(*table_training_pairs(tasks))


def pretrain_ml_status_model(version: str = "v3", *, seed: int = 0) -> StatusModel:
    """The status model of ``version``, fitted on the committed table's statuses of that
    version's pretraining splits (:data:`PRETRAINING_SPLITS`), on the feature rows that
    version reads. Rebuild the committed one with
    ``pretrain_ml_status_model(v).save(STATUS_ARTIFACTS[v])``."""
    from wmrl_env.envs.ml_tasks import load_table
    from wmrl_env.world_models.outcomes import observed_status

    if version not in PRETRAINING_SPLITS:
        raise ValueError(f"version must be one of {sorted(PRETRAINING_SPLITS)}, got {version!r}")
    rows = load_table().with_text(pretraining_tasks(PRETRAINING_SPLITS[version]))
    model = new_ml_world_model(version, seed=seed)
    builder = model.rows if version == "v3" else model._row_builder
    x, parsed = builder([r["description"] for r in rows], [r["program"] for r in rows])
    labels = [status_label(*observed_status(r["status"], r["message"], r["program"])) for r in rows]
    keep = np.flatnonzero(parsed)
    return StatusModel(seed=seed).fit(x[keep], [labels[i] for i in keep])
