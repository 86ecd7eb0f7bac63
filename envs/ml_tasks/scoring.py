"""Host-side scoring of ``predictions.csv``: validation, metrics and the normalised score.

A solution writes ``predictions.csv`` with the header ``id,prediction`` and one row per test
id. :func:`read_predictions` checks it and raises
:class:`~wmrl_env.sandboxes.job.InvalidOutputError` with a clear message for anything that
cannot be scored (missing file, wrong header, wrong or duplicate ids, wrong row count,
non-numeric values, NaN or infinity, labels outside the known classes).

Normalised score (the reward), for a raw metric value ``m`` of a task with trivial-baseline
value ``b`` and reference (best seen) value ``r``::

    normalised(m) = clip((m - b) / (r - b), 0, 1)

The same formula serves metrics where lower is better (RMSE: ``r < b``). A solution no better
than the trivial baseline scores 0, one that matches the best score seen scores 1; values
beyond either end are clipped (the raw metric is always reported beside it).

Example:
    >>> normalised_score(0.9, baseline=0.5, reference=1.0)
    0.8
    >>> normalised_score(12.0, baseline=20.0, reference=10.0)  # RMSE: lower is better
    0.8
    >>> normalised_score(0.4, baseline=0.5, reference=1.0)  # worse than the baseline
    0.0
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from wmrl_env.sandboxes.job import InvalidOutputError

__all__ = [
    "METRICS",
    "PREDICTIONS_FILE",
    "Metric",
    "normalised_score",
    "read_predictions",
]

PREDICTIONS_FILE = "predictions.csv"


@dataclass(frozen=True)
class Metric:
    """A task metric: its name, direction and the value a perfect solution gets."""

    name: str
    higher_is_better: bool
    ideal: float
    description: str

    def __call__(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return float(_METRIC_FUNCTIONS[self.name](y_true, y_pred))


def _accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(y_true == y_pred))


def _roc_auc(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y_true, y_pred))


def _r2(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    residual = np.sum((y_true - y_pred) ** 2)
    total = np.sum((y_true - np.mean(y_true)) ** 2)
    return float(1.0 - residual / total)


def _rmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))


_METRIC_FUNCTIONS = {"accuracy": _accuracy, "roc_auc": _roc_auc, "r2": _r2, "rmse": _rmse}

METRICS: dict[str, Metric] = {
    "accuracy": Metric("accuracy", True, 1.0, "accuracy (share of correct labels)"),
    "roc_auc": Metric("roc_auc", True, 1.0, "ROC-AUC of the predicted score for class 1"),
    "r2": Metric("r2", True, 1.0, "R^2 (coefficient of determination)"),
    "rmse": Metric("rmse", False, 0.0, "RMSE (root mean squared error)"),
}


def normalised_score(raw: float, *, baseline: float, reference: float) -> float:
    """``clip((raw - baseline) / (reference - baseline), 0, 1)``; see the module docstring.

    A NaN ``raw`` stays NaN. When the reference is no better than the baseline (a degenerate
    task), the score is 1 for a raw value at least as good as the baseline, else 0.
    """
    if math.isnan(raw):
        return math.nan
    span = reference - baseline
    if span == 0 or math.isnan(span):
        return 1.0 if raw == baseline else 0.0
    return float(min(1.0, max(0.0, (raw - baseline) / span)))


def read_predictions(
    outputs: Mapping[str, bytes],
    ids: np.ndarray,
    *,
    classes: np.ndarray | None = None,
) -> np.ndarray:
    """Parse and validate ``predictions.csv``; return the predictions in the order of ``ids``.

    Args:
        outputs: the job's collected files, name -> content.
        ids: the expected test ids (integers).
        classes: for label predictions, the allowed class labels (integers); ``None`` for
            real-valued predictions (scores, probabilities, regression values).

    Raises:
        InvalidOutputError: the file is missing or cannot be scored; the message says why.

    Example:
        >>> read_predictions({"predictions.csv": b"id,prediction\\n1,0.5\\n0,2\\n"},
        ...                  np.array([0, 1]))
        array([2. , 0.5])
        >>> try:
        ...     read_predictions({"predictions.csv": b"id,prediction\\n0,nan\\n"}, np.array([0]))
        ... except InvalidOutputError as error:
        ...     print(error)
        predictions.csv row 2 (id 0): prediction is NaN or infinite ('nan')
    """
    if PREDICTIONS_FILE not in outputs:
        raise InvalidOutputError(
            f"{PREDICTIONS_FILE} was not written: the program must write it to its working "
            "directory with the header 'id,prediction'"
        )
    try:
        text = outputs[PREDICTIONS_FILE].decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidOutputError(f"{PREDICTIONS_FILE} is not UTF-8 text ({exc})") from None
    rows = [row for row in csv.reader(io.StringIO(text)) if row]
    if not rows:
        raise InvalidOutputError(f"{PREDICTIONS_FILE} is empty; expected header 'id,prediction'")
    header = [cell.strip() for cell in rows[0]]
    if header != ["id", "prediction"]:
        raise InvalidOutputError(
            f"{PREDICTIONS_FILE} header is {','.join(header)!r}; expected 'id,prediction'"
        )
    body = rows[1:]
    if len(body) != len(ids):
        raise InvalidOutputError(
            f"{PREDICTIONS_FILE} has {len(body)} prediction rows; expected {len(ids)} "
            "(one per test id)"
        )
    position = {int(i): k for k, i in enumerate(ids)}
    allowed = None if classes is None else {int(c) for c in classes}
    values = np.empty(len(ids), dtype=np.float64)
    seen: set[int] = set()
    for line, row in enumerate(body, start=2):
        if len(row) != 2:
            raise InvalidOutputError(f"{PREDICTIONS_FILE} row {line} has {len(row)} fields")
        row_id = _parse_id(row[0], line)
        if row_id not in position:
            raise InvalidOutputError(f"{PREDICTIONS_FILE} row {line}: id {row_id} is not a test id")
        if row_id in seen:
            raise InvalidOutputError(f"{PREDICTIONS_FILE} row {line}: id {row_id} is repeated")
        seen.add(row_id)
        values[position[row_id]] = _parse_value(row[1], line, row_id, allowed)
    return values


def _parse_id(cell: str, line: int) -> int:
    try:
        number = float(cell)
    except ValueError:
        raise InvalidOutputError(
            f"{PREDICTIONS_FILE} row {line}: id {cell!r} is not an integer"
        ) from None
    if not number.is_integer():
        raise InvalidOutputError(f"{PREDICTIONS_FILE} row {line}: id {cell!r} is not an integer")
    return int(number)


def _parse_value(cell: str, line: int, row_id: int, allowed: set[int] | None) -> float:
    where = f"{PREDICTIONS_FILE} row {line} (id {row_id})"
    try:
        value = float(cell)
    except ValueError:
        raise InvalidOutputError(f"{where}: prediction {cell!r} is not a number") from None
    if not math.isfinite(value):
        raise InvalidOutputError(f"{where}: prediction is NaN or infinite ({cell!r})")
    if allowed is not None and not (value.is_integer() and int(value) in allowed):
        raise InvalidOutputError(
            f"{where}: prediction {cell!r} is not a class label; expected one of {sorted(allowed)}"
        )
    return value
