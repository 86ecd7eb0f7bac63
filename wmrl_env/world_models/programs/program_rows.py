"""Feature rows of (task, program) pairs: program features, task features, interactions.

What world models v2 and v3 read. A row is the program's syntax-tree features
(:mod:`~wmrl_env.world_models.programs.program_features`), the task's features (``task_featurizer``)
and :data:`INTERACTION_NAMES`, products that encode known failure modes (``log1p`` on
negative columns, no imputation on data with missing values, a classifier on a regression
task ...). Interactions are computed for a whole batch at once with column indices looked
up once; rows are cached by (task text, program text) key, so a program seen before costs
a dictionary lookup.

Example:
    >>> import numpy as np
    >>> rows = ProgramTaskRows(lambda c: np.array([0.0, 1.0]), ("kind_regression", "log_rows"))
    >>> x, ok = rows(["task a", "task a"], ["from sklearn.svm import SVC\\nSVC()", "def f(:"])
    >>> x.shape == (2, rows.width), ok.tolist()
    (True, [True, False])
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from wmrl_env.world_models.programs.program_features import PROGRAM_FEATURE_NAMES, ProgramFeaturizer
from wmrl_env.world_models.text import as_text, text_key

__all__ = ["INTERACTION_NAMES", "ProgramTaskRows"]

INTERACTION_NAMES: tuple[str, ...] = (
    "family_landmark",
    "family_landmark_minus_best",
    "log1p_x_negative_columns",
    "log1p_before_impute_x_negative_columns",
    "no_impute_x_missing",
    "regressor_on_classification",
    "classifier_on_regression",
    "binary_without_scores",
    "log_rows_plus_log_trees",
    "poly_degree_x_log_columns",
    "unscaled_x_scale_spread",
)
_P = {name: i for i, name in enumerate(PROGRAM_FEATURE_NAMES)}
_FAMILIES = ("linear", "knn", "tree", "forest", "boosting", "svm")
_FAMILY_LANDMARK = ("linear", "knn", "stump", "forest", "forest", "svm")  # per _FAMILIES
_LANDMARKS = ("linear", "svm", "knn", "stump", "forest")


class ProgramTaskRows:
    """Batched, cached feature rows for (context, program) pairs.

    Args:
        task_featurizer: context -> task feature vector (fixed length; NaN allowed).
        task_feature_names: names of those features; the interactions look up
            ``missing_share``, ``negative_columns_share``, ``kind_*``, ``landmark_*``,
            ``log_rows``, ``log_columns``, ``log_scale_spread`` (0 when absent).
        max_rows: rows kept in the (task, program) cache (LRU).
    """

    def __init__(
        self,
        task_featurizer: Callable[[Any], np.ndarray],
        task_feature_names: Sequence[str],
        *,
        max_rows: int = 50_000,
    ) -> None:
        self.task_featurizer = task_featurizer
        self.task_feature_names = tuple(task_feature_names)
        self.width = len(PROGRAM_FEATURE_NAMES) + len(self.task_feature_names)
        self.width += len(INTERACTION_NAMES)
        self.max_rows = max_rows
        self.programs = ProgramFeaturizer()
        self._tasks: OrderedDict[str, np.ndarray] = OrderedDict()
        self._rows: OrderedDict[tuple[str, str], np.ndarray | None] = OrderedDict()
        names = self.task_feature_names
        self._t = {name: names.index(name) for name in names}

    def task_vector(self, context: Any, key: str | None = None) -> np.ndarray:
        """The task features of ``context`` (cached by its text)."""
        key = key or text_key(as_text(context))
        if key not in self._tasks:
            vector = np.asarray(self.task_featurizer(context), dtype=np.float64).reshape(-1)
            if vector.shape != (len(self.task_feature_names),):
                raise ValueError(
                    f"task_featurizer returned {vector.shape}, "
                    f"expected ({len(self.task_feature_names)},)"
                )
            self._tasks[key] = vector
            if len(self._tasks) > 4096:
                self._tasks.popitem(last=False)
        return self._tasks[key]

    def __call__(
        self,
        contexts: Sequence[Any],
        programs: Sequence[str],
        task_keys: Sequence[str] | None = None,
        program_keys: Sequence[str] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Feature rows (NaN rows for unparseable programs) and the parseable mask; the
        text keys of contexts and programs may be passed when the caller has them."""
        task_keys = task_keys or [text_key(as_text(c)) for c in contexts]
        program_keys = program_keys or [text_key(p) for p in programs]
        rows = np.full((len(programs), self.width), np.nan)
        ok = np.zeros(len(programs), dtype=bool)
        missing: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(task_keys, program_keys, strict=True)):
            row = self._rows.get(key, False)
            if row is False:
                missing.setdefault(key, []).append(i)
            elif row is not None:
                rows[i], ok[i] = row, True
        if missing:
            first = [members[0] for members in missing.values()]
            features = self.programs([programs[i] for i in first])
            parsed = [j for j, f in enumerate(features) if f is not None]
            new = {key: None for key in missing}
            if parsed:
                program = np.stack([features[j] for j in parsed])
                task = np.stack(
                    [self.task_vector(contexts[first[j]], task_keys[first[j]]) for j in parsed]
                )
                built = np.concatenate([program, task, self._interactions(program, task)], 1)
                keys = list(missing)
                for j, row in zip(parsed, built, strict=True):
                    new[keys[j]] = row
            for key, row in new.items():
                self._rows[key] = row
                if row is not None:
                    rows[missing[key]], ok[missing[key]] = row, True
            while len(self._rows) > self.max_rows:
                self._rows.popitem(last=False)
        return rows, ok

    def _task_column(self, task: np.ndarray, name: str) -> np.ndarray:
        index = self._t.get(name)
        return np.zeros(len(task)) if index is None else task[:, index]

    def _interactions(self, program: np.ndarray, task: np.ndarray) -> np.ndarray:
        """:data:`INTERACTION_NAMES` for rows of program and task features."""

        def t(name: str) -> np.ndarray:
            return self._task_column(task, name)

        def p(name: str) -> np.ndarray:
            return program[:, _P[name]]

        families = np.stack([p(f"family_{f}") for f in _FAMILIES], axis=1)
        family = np.argmax(families, axis=1)  # first family on ties, as max() picks
        by_name = {name: t(f"landmark_{name}") for name in _LANDMARKS}
        landmarks = np.stack([by_name[name] for name in _FAMILY_LANDMARK], axis=1)
        chosen = landmarks[np.arange(len(program)), family]
        landmark = np.where(families[np.arange(len(program)), family] > 0, chosen, np.nan)
        with np.errstate(all="ignore"):
            finite = np.where(np.isnan(landmarks), -np.inf, landmarks).max(axis=1)
        best = np.where(np.isinf(finite), np.nan, finite)
        nan_tolerant = (p("family_boosting") > 0) & (p("family_unknown") == 0)
        classify = 1.0 - t("kind_regression")  # NaN stays NaN
        scored = np.maximum(p("predict_proba"), p("decision_function"))
        return np.column_stack(
            [
                landmark,
                landmark - best,
                p("log1p") * t("negative_columns_share"),
                p("log1p_before_impute") * t("negative_columns_share"),
                (1.0 - p("imputes")) * (~nan_tolerant) * t("missing_share"),
                p("is_regressor") * classify,
                p("is_classifier") * (1.0 - classify),
                t("kind_binary") * (1.0 - scored),
                t("log_rows") + np.nan_to_num(p("log_n_estimators")),
                p("poly_degree") * t("log_columns"),
                (1.0 - p("scales")) * t("log_scale_spread"),
            ]
        )
