"""What every ML task class shares: the split helpers, the exported files and the job.

:class:`TaskFiles` is mixed into :class:`~wmrl_env.envs.ml_tasks.tasks.MLTask` and
:class:`~wmrl_env.envs.ml_tasks.private_test.PrivateTestTask`: both hold ``task_id``,
``dataset``, ``X_train`` / ``y_train`` / ``X_test`` and ``timeout_s``, and differ only in how
they split rows and which labels their scorer holds.

Example:
    >>> import numpy as np
    >>> mask = holdout_mask(np.array([0, 0, 1, 1]), "binary", np.random.default_rng(0), 0.5)
    >>> int(mask.sum())
    2
    >>> trivial_predictions("regression", np.array([1.0, 3.0]), 2)
    array([2., 2.])
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.sandboxes.job import Job
from wmrl_env.utils.hashing import artifact_hash

from .datasets import TaskKind
from .description import describe
from .scoring import PREDICTIONS_FILE

__all__ = ["TaskFiles", "default_data_root", "holdout_mask", "trivial_predictions"]


def default_data_root() -> Path:
    """Where task data is exported: ``$WMRL_DATA_DIR`` or ``~/.cache/wmrl_env/ml_tasks``."""
    root = os.environ.get("WMRL_DATA_DIR")
    return Path(root) if root else Path.home() / ".cache" / "wmrl_env" / "ml_tasks"


def holdout_mask(
    y: np.ndarray, kind: TaskKind, rng: np.random.Generator, fraction: float
) -> np.ndarray:
    """Boolean mask of ``fraction`` of the rows: stratified by class for classification,
    plain otherwise."""
    chosen = np.zeros(len(y), dtype=bool)
    groups = (
        [np.flatnonzero(y == c) for c in np.unique(y)]
        if kind != "regression"
        else [np.arange(len(y))]
    )
    for members in groups:
        chosen[rng.permutation(members)[: round(fraction * len(members))]] = True
    return chosen


def trivial_predictions(kind: TaskKind, y_train: np.ndarray, n: int) -> np.ndarray:
    """The trivial baseline: a constant score, the majority class, or the train mean."""
    if kind == "binary":
        return np.full(n, 0.5)
    if kind == "multiclass":
        labels, counts = np.unique(y_train, return_counts=True)
        return np.full(n, labels[np.argmax(counts)])
    return np.full(n, float(np.mean(y_train)))


def _csv(header: list[str], X: np.ndarray, target: np.ndarray | None) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for i, row in enumerate(X):
        cells = [str(i), *("" if math.isnan(v) else repr(float(v)) for v in row)]
        if target is not None:
            cells.append(repr(target[i].item()))
        writer.writerow(cells)
    return buffer.getvalue().encode()


class TaskFiles:
    """The task's kind, description, exported ``train.csv`` / ``test.csv`` and its jobs.

    ``train.csv`` holds the fit rows with their labels, ``test.csv`` the scored rows'
    features only: no label of a scored row is ever written.
    """

    task_id: str
    timeout_s: float

    @property
    def kind(self) -> TaskKind:
        return self.dataset.kind

    @property
    def classes(self) -> np.ndarray | None:
        """Class labels for label-predicting tasks (multiclass), else ``None``."""
        return np.unique(self.y_train) if self.kind == "multiclass" else None

    @functools.cached_property
    def description(self) -> str:
        """What the agent (and the world model) reads: the task in plain ASCII text."""
        return describe(self)

    @functools.cached_property
    def csv_files(self) -> dict[str, bytes]:
        """``train.csv`` (id, features, target) and ``test.csv`` (id, features), as bytes."""
        names = list(self.dataset.feature_names)
        target = self.y_train.astype(np.int64) if self.kind != "regression" else self.y_train
        return {
            "train.csv": _csv(["id", *names, "target"], self.X_train, target),
            "test.csv": _csv(["id", *names], self.X_test, None),
        }

    @functools.cached_property
    def _digest(self) -> str:
        files = self.csv_files
        return hashlib.sha256(b"".join(files[name] for name in sorted(files))).hexdigest()

    def export(self, root: str | os.PathLike[str] | None = None) -> Path:
        """Write the task's files to a read-only directory (reused when already there).

        The directory name holds a digest of the content, so a changed split never reuses
        stale files, and concurrent exports of the same task are safe.
        """
        root = Path(root) if root is not None else default_data_root()
        final = root / f"{self.task_id}-{self._digest[:16]}"
        if final.is_dir():
            return final
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{self.task_id}-", dir=root))
        for name, content in self.csv_files.items():
            (staging / name).write_bytes(content)
            (staging / name).chmod(0o444)
        staging.chmod(0o555)
        try:
            staging.rename(final)
        except OSError:  # another process exported it first
            staging.chmod(0o755)
            shutil.rmtree(staging)
        return final

    def _job(
        self,
        program: str,
        scorer: Callable[[Mapping[str, bytes]], float],
        data_root: str | os.PathLike[str] | None,
        timeout_s: float | None,
        tags: Mapping[str, Any] | None,
    ) -> Job:
        directory = self.export(data_root)
        return Job(
            program=program,
            inputs={name: directory / name for name in ("train.csv", "test.csv")},
            output_files=(PREDICTIONS_FILE,),
            scorer=scorer,
            timeout_s=timeout_s if timeout_s is not None else self.timeout_s,
            tags={"task_id": self.task_id, "program_hash": artifact_hash(program), **(tags or {})},
        )
