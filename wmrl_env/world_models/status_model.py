"""How a parseable program's run ends, learned from the statuses real executions recorded.

A :class:`StatusModel` is a gradient-boosted classifier on the same (program x task) feature
rows the program world models read (:class:`~wmrl_env.world_models.program_rows.ProgramTaskRows`,
so a program is parsed once for its score and its status). Its labels are ``ok``,
``timeout``, ``invalid_output`` and ``crashed:<error class>`` (classes seen fewer than
``min_count`` times pooled as ``crashed:unknown``); its probabilities are shrunk by
``smoothing`` toward the training frequencies with one pseudo-count per status, so a status
never seen in training keeps a small probability. ``does_not_parse`` is the pre-gate's
answer, not this model's (its rows are those of parseable programs).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(400, 3))
    >>> labels = np.where(x[:, 0] > 1, "crashed:ValueError", "ok")
    >>> model = StatusModel(min_count=5).fit(x, labels)
    >>> probs, classes, _ = model.predict(np.array([[2.0, 0, 0], [-2.0, 0, 0]]))
    >>> bool(probs[0, 2] > 0.9 and probs[1, 0] > 0.9), classes
    (True, ('ValueError',))
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.world_models.outcomes import STATUSES, UNKNOWN_ERROR
from wmrl_env.world_models.pretraining import one_thread
from wmrl_env.world_models.program_features import PROGRAM_FEATURE_NAMES

__all__ = ["FORMAT_VERSION", "StatusModel", "status_label"]

FORMAT_VERSION = 1
_PARSEABLE = ("ok", "crashed", "timeout", "invalid_output")


def status_label(status: str, error: str = "") -> str:
    """The classifier's label of a contract status (a crash carries its class)."""
    return f"crashed:{error or UNKNOWN_ERROR}" if status == "crashed" else status


class StatusModel:
    """Status probabilities of parseable programs' runs (see the module doc).

    Args:
        min_count: crashes of a class seen fewer times pool as ``crashed:unknown``.
        smoothing: weight of the training frequencies (one pseudo-count per status) mixed
            into every prediction.
        seed: the boosting's seed.
    """

    def __init__(self, *, min_count: int = 10, smoothing: float = 0.01, seed: int = 0) -> None:
        if min_count < 1 or not 0.0 <= smoothing < 1.0:
            raise ValueError("min_count must be >= 1 and smoothing in [0, 1)")
        self.min_count = min_count
        self.smoothing = smoothing
        self.seed = seed
        self.labels: tuple[str, ...] = ()
        self.prior = np.zeros(0)
        self._classifier: Any = None

    @property
    def fitted(self) -> bool:
        return bool(self.labels)

    @property
    def error_classes(self) -> tuple[str, ...]:
        crashes = tuple(label.split(":", 1)[1] for label in self.labels if ":" in label)
        return crashes or (UNKNOWN_ERROR,)

    def fit(self, rows: np.ndarray, labels: Sequence[str]) -> StatusModel:
        """Fit on feature rows of parseable programs and their labels (:func:`status_label`)."""
        from sklearn.ensemble import HistGradientBoostingClassifier

        rows = np.asarray(rows, dtype=np.float64)
        labels = np.asarray([str(label) for label in labels], dtype=object)
        if rows.ndim != 2 or rows.shape[0] != len(labels) or not len(labels):
            raise ValueError(f"rows {rows.shape} and {len(labels)} labels do not match")
        bad = sorted({str(lb).split(":")[0] for lb in labels} - set(_PARSEABLE))
        if bad:
            raise ValueError(f"labels of unknown statuses {bad}; expected {_PARSEABLE}")
        counts = Counter(labels)
        pooled = f"crashed:{UNKNOWN_ERROR}"
        labels = np.array(
            [lb if not lb.startswith("crashed:") or counts[lb] >= self.min_count else pooled
             for lb in labels], dtype=object)  # fmt: skip
        counts = Counter(labels)
        self.labels = tuple(sorted(counts))
        self.prior = np.array([counts[label] for label in self.labels], dtype=np.float64)
        self.prior /= self.prior.sum()
        self._status_prior = np.array(
            [sum(counts[lb] for lb in counts if lb.split(":")[0] == s) + 1.0 for s in _PARSEABLE]
        )
        self._status_prior /= self._status_prior.sum()
        if len(self.labels) > 1:
            rows = rows.copy()
            rows[:, np.isnan(rows).all(axis=0)] = 0.0
            classifier = HistGradientBoostingClassifier(
                max_iter=150, learning_rate=0.08, max_leaf_nodes=15, min_samples_leaf=10,
                l2_regularization=1.0, random_state=self.seed,
            )  # fmt: skip
            with one_thread():
                self._classifier = classifier.fit(rows, labels)
        return self

    def predict(self, rows: np.ndarray) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
        """``(status_probs (N, 5), error_classes, error_probs (N, K))`` for rows of parseable
        programs (``does_not_parse`` is 0)."""
        if not self.fitted:
            raise RuntimeError("StatusModel is not fitted: call fit() or load()")
        rows = np.asarray(rows, dtype=np.float64)
        n = rows.shape[0]
        if self._classifier is None or n == 0:
            label_probs = np.tile(self.prior, (n, 1))
        else:
            with one_thread():
                raw = self._classifier.predict_proba(rows)
            order = [list(self._classifier.classes_).index(label) for label in self.labels]
            label_probs = raw[:, order]
        status = np.zeros((n, len(STATUSES)))
        crash_columns = [j for j, lb in enumerate(self.labels) if lb.startswith("crashed:")]
        for j, label in enumerate(self.labels):
            status[:, STATUSES.index(label.split(":")[0])] += label_probs[:, j]
        prior = np.zeros(len(STATUSES))
        for s, p in zip(_PARSEABLE, self._status_prior, strict=True):
            prior[STATUSES.index(s)] = p
        status = (1.0 - self.smoothing) * status + self.smoothing * prior
        if crash_columns:
            crashes = label_probs[:, crash_columns]
            total = crashes.sum(axis=1, keepdims=True)
            uniform = np.full_like(crashes, 1.0 / len(crash_columns))
            error_probs = np.where(total > 0, crashes / np.where(total > 0, total, 1.0), uniform)
        else:
            error_probs = np.ones((n, 1))
        return status, self.error_classes, error_probs

    # ----------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        """Pickle the fitted model with the feature names and scikit-learn version."""
        import sklearn

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "version": FORMAT_VERSION,
            "sklearn": sklearn.__version__,
            "program_feature_names": PROGRAM_FEATURE_NAMES,
            "model": self,
        }
        path.write_bytes(pickle.dumps(state, protocol=4))
        return path

    @classmethod
    def load(cls, path: str | Path) -> StatusModel:
        """Read :meth:`save`'s file (a trusted pickle); refused when its format, program
        features or scikit-learn minor version differ."""
        import sklearn

        state = pickle.loads(Path(path).read_bytes())
        if not isinstance(state, dict) or state.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path}: not a status model of format {FORMAT_VERSION}")
        if tuple(state["program_feature_names"]) != PROGRAM_FEATURE_NAMES:
            raise ValueError(f"{path} was trained on other program features: retrain it")
        if state["sklearn"].split(".")[:2] != sklearn.__version__.split(".")[:2]:
            raise ValueError(
                f"{path} was saved with scikit-learn {state['sklearn']}, this is "
                f"{sklearn.__version__}: retrain it (pretrain_ml_status_model)"
            )
        return state["model"]
