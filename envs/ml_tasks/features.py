"""Task features: numbers that describe a task, computed only from what an agent sees.

The agent sees the description and ``inputs/train.csv`` (``MLTask.X_train`` / ``y_train`` are
exactly that file's content). :func:`task_features` turns them into a fixed-length vector
(:data:`TASK_FEATURE_NAMES`): size, kind, classes and their balance, missingness, skew,
negative values (``log1p`` fails on them), categorical-looking columns, and cheap landmarks:
3-fold cross-validated scores of a 1-nearest-neighbour, a depth-1 stump and a linear model on
a subsample of at most 400 rows. Test labels are never read. Results are cached per task.

Landmark scores are on one scale for every kind: accuracy above the majority share
(classification) or R^2 clipped to [-1, 1] (regression).

Example:
    >>> from wmrl_env.envs.ml_tasks import get_task
    >>> x = task_features(get_task("iris"))
    >>> x.shape == (len(TASK_FEATURE_NAMES),), feature(x, "kind_multiclass")
    (True, 1.0)
    >>> feature(x, "landmark_1nn") > 0.4  # 1-NN separates iris well above the majority
    True
"""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .tasks import MLTask

__all__ = [
    "METRIC_NAMES",
    "TASK_FEATURE_NAMES",
    "context_features",
    "description_features",
    "feature",
    "task_features",
    "train_features",
]

KINDS = ("binary", "multiclass", "regression")
METRIC_NAMES = ("accuracy", "roc_auc", "r2", "rmse")
LANDMARK_ROWS = 400
LANDMARK_SEED = 0

TASK_FEATURE_NAMES: tuple[str, ...] = (
    "log_rows",
    "log_columns",
    "log_rows_per_column",
    *(f"kind_{kind}" for kind in KINDS),
    *(f"metric_{metric}" for metric in METRIC_NAMES),
    "log_classes",
    "minority_share",  # smallest class share (classification), NaN for regression
    "class_entropy",  # normalised class entropy, NaN for regression
    "missing_share",  # share of empty cells
    "columns_with_missing_share",
    "median_abs_skew",
    "max_abs_skew",
    "negative_columns_share",  # columns with a value below -1: log1p gives NaN there
    "categorical_columns_share",  # integer-valued columns with at most 10 distinct values
    "constant_columns_share",
    "log_scale_spread",  # log10 of max / median column std: scaling matters when large
    "target_abs_skew",  # regression target, NaN for classification
    "landmark_1nn",
    "landmark_stump",
    "landmark_linear",
    "landmark_linear_minus_1nn",
)
_INDEX = {name: i for i, name in enumerate(TASK_FEATURE_NAMES)}
_CACHE: dict[tuple[str, str], np.ndarray] = {}


def feature(x: np.ndarray, name: str) -> float:
    """The value of feature ``name`` in a :func:`task_features` vector."""
    return float(x[_INDEX[name]])


def task_features(task: MLTask) -> np.ndarray:
    """The feature vector of ``task`` (cached per task id and data digest; a copy)."""
    key = (task.task_id, task._digest)
    if key not in _CACHE:
        _CACHE[key] = train_features(task.X_train, task.y_train, task.kind, task.metric)
    return _CACHE[key].copy()


def context_features(context: MLTask | str) -> np.ndarray:
    """Task features behind a world model's context: an :class:`MLTask`, or a description.

    A description names its task on its first line (``Task <id>: ...``); when that task is
    registered and its description is exactly this text, its full :func:`task_features`
    are returned. Any other text gets :func:`description_features` (what the words say;
    landmarks unknown, NaN).
    """
    from .tasks import MLTask

    if isinstance(context, MLTask):
        return task_features(context)
    text = str(context)
    match = _TASK_LINE.match(text)
    if match:
        task = _registered_task(match["task_id"])
        if task is not None and task.description == text:
            return task_features(task)
    return description_features(text)


_TASK_LINE = re.compile(r"Task (?P<task_id>[A-Za-z0-9_.-]+):")


def _registered_task(task_id: str) -> MLTask | None:
    from .registry import get_task

    try:
        return get_task(task_id)
    except (ValueError, ImportError, OSError):  # unknown id, or its dataset is not installed
        return None


def description_features(text: str) -> np.ndarray:
    """Task features read from a description in the suite's words (NaN where it is silent).

    >>> x = description_features("Type: multiclass classification (3 classes). Metric: "
    ...     "accuracy ... the 4 features and target (105 rows) ... no missing values.")
    >>> round(10 ** feature(x, "log_classes")), round(feature(x, "log_rows"), 2)
    (3, 2.02)
    """
    out = np.full(len(TASK_FEATURE_NAMES), np.nan)
    lower = text.lower()
    kind = next((k for k, w in _KIND_WORDS.items() if w in lower), None)
    if kind is not None:
        for option in KINDS:
            out[_INDEX[f"kind_{option}"]] = float(kind == option)
    metric = next((m for m, w in _METRIC_WORDS.items() if re.search(w, lower)), None)
    if metric is not None:
        for option in METRIC_NAMES:
            out[_INDEX[f"metric_{option}"]] = float(metric == option)
    classes = re.search(r"\((\d+) classes\)", lower)
    if classes:
        out[_INDEX["log_classes"]] = np.log10(int(classes[1]))
    elif kind == "binary":
        out[_INDEX["log_classes"]] = np.log10(2)
    size = re.search(r"the (\d+) features and target \((\d+) rows\)", lower)
    if size:
        columns, rows = int(size[1]), int(size[2])
        out[_INDEX["log_rows"]] = np.log10(rows)
        out[_INDEX["log_columns"]] = np.log10(max(columns, 1))
        out[_INDEX["log_rows_per_column"]] = np.log10(rows / max(columns, 1))
    missing = re.search(r"empty cells \((\d+) in train", lower)
    if missing and size:
        out[_INDEX["missing_share"]] = int(missing[1]) / max(rows * columns, 1)
    elif "no missing values" in lower:
        out[_INDEX["missing_share"]] = 0.0
        out[_INDEX["columns_with_missing_share"]] = 0.0
    return out


_KIND_WORDS = {
    "multiclass": "multiclass classification",
    "binary": "binary classification",
    "regression": "regression",
}
_METRIC_WORDS = {
    "roc_auc": r"roc[- ]auc",
    "rmse": r"root mean squared error|\brmse\b",
    "r2": r"\br\^?2\b|coefficient of determination",
    "accuracy": r"accuracy",
}


def train_features(X: np.ndarray, y: np.ndarray, kind: str, metric: str) -> np.ndarray:
    """Features of a train file's features ``X`` (NaN = missing) and target ``y``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if metric not in METRIC_NAMES:
        raise ValueError(f"metric must be one of {METRIC_NAMES}, got {metric!r}")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or len(X) != len(y) or len(y) < 2:
        raise ValueError(f"need a 2-D X with one row per target and 2+ rows, got {X.shape}")
    rows, columns = X.shape
    out = np.full(len(TASK_FEATURE_NAMES), np.nan)

    def put(name: str, value: float) -> None:
        out[_INDEX[name]] = value

    put("log_rows", np.log10(rows))
    put("log_columns", np.log10(max(columns, 1)))
    put("log_rows_per_column", np.log10(rows / max(columns, 1)))
    for option in KINDS:
        put(f"kind_{option}", float(kind == option))
    for option in METRIC_NAMES:
        put(f"metric_{option}", float(metric == option))
    if kind != "regression":
        _, counts = np.unique(y, return_counts=True)
        shares = counts / counts.sum()
        put("log_classes", np.log10(len(counts)))
        put("minority_share", shares.min())
        put("class_entropy", -(shares * np.log(shares)).sum() / np.log(max(len(counts), 2)))
    else:
        put("target_abs_skew", abs(_skew(y.astype(np.float64))))
    missing = np.isnan(X)
    put("missing_share", missing.mean() if X.size else 0.0)
    put("columns_with_missing_share", missing.any(axis=0).mean() if columns else 0.0)
    skews = np.array([abs(_skew(column[~np.isnan(column)])) for column in X.T])
    put("median_abs_skew", np.median(skews) if columns else 0.0)
    put("max_abs_skew", skews.max() if columns else 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        minima = np.nanmin(X, axis=0) if columns else np.zeros(0)
        stds = np.nanstd(X, axis=0) if columns else np.zeros(0)
    put("negative_columns_share", np.mean(minima < -1) if columns else 0.0)
    put("categorical_columns_share", np.mean([_categorical(c) for c in X.T]) if columns else 0.0)
    put("constant_columns_share", np.mean(~(stds > 0)) if columns else 0.0)
    positive = stds[stds > 0]
    spread = np.log10(positive.max() / np.median(positive)) if positive.size else 0.0
    put("log_scale_spread", spread)
    for name, value in _landmarks(X, y, kind).items():
        put(name, value)
    put("landmark_linear_minus_1nn", out[_INDEX["landmark_linear"]] - out[_INDEX["landmark_1nn"]])
    return out


def _skew(values: np.ndarray) -> float:
    if values.size < 3 or not values.std() > 0:
        return 0.0
    centred = values - values.mean()
    return float(np.clip((centred**3).mean() / values.std() ** 3, -50, 50))


def _categorical(column: np.ndarray) -> bool:
    values = column[~np.isnan(column)]
    return bool(values.size) and np.all(values == np.round(values)) and len(np.unique(values)) <= 10


def _landmarks(X: np.ndarray, y: np.ndarray, kind: str) -> dict[str, float]:
    """3-fold CV scores of 1-NN, a stump and a linear model on a seeded subsample."""
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    rng = np.random.default_rng(LANDMARK_SEED)
    if len(y) > LANDMARK_ROWS:
        keep = np.sort(rng.choice(len(y), size=LANDMARK_ROWS, replace=False))
        X, y = X[keep], y[keep]
    X = np.where(np.isfinite(X), X, np.nan)
    X = X[:, ~np.isnan(X).all(axis=0)] if X.shape[1] else X
    names = ("landmark_1nn", "landmark_stump", "landmark_linear")
    if X.shape[1] == 0:
        return dict.fromkeys(names, 0.0)
    classify = kind != "regression"
    if classify:
        _, counts = np.unique(y, return_counts=True)
        if counts.min() < 3:  # too few of a class for stratified folds
            return dict.fromkeys(names, np.nan)
        folds = StratifiedKFold(3, shuffle=True, random_state=LANDMARK_SEED)
        models = (
            KNeighborsClassifier(1),
            DecisionTreeClassifier(max_depth=1, random_state=0),
            LogisticRegression(C=1.0, max_iter=300),
        )
        offset, scoring = counts.max() / counts.sum(), "accuracy"
    else:
        folds = KFold(3, shuffle=True, random_state=LANDMARK_SEED)
        models = (
            KNeighborsRegressor(1),
            DecisionTreeRegressor(max_depth=1, random_state=0),
            Ridge(alpha=1.0),
        )
        offset, scoring = 0.0, "r2"
    out = {}
    for name, model in zip(names, models, strict=True):
        pipeline = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores = cross_val_score(pipeline, X, y, cv=folds, scoring=scoring)
        out[name] = float(np.clip(np.nanmean(scores) - offset, -1.0, 1.0))
    return out
