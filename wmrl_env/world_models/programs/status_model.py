"""How a parseable program's run ends, learned from the statuses real executions recorded.

A :class:`StatusModel` is a gradient-boosted classifier on the same (program x task) feature
rows the program world models read
(:class:`~wmrl_env.world_models.programs.program_rows.ProgramTaskRows`, so a program is
parsed once for its score and its status). Its labels are ``ok``, ``timeout``,
``invalid_output`` and ``crashed:<error class>`` (classes seen fewer than
``min_count`` times pooled as ``crashed:unknown``); its probabilities are shrunk by
``smoothing`` toward the training frequencies with one pseudo-count per status, so a status
never seen in training keeps a small probability. ``does_not_parse`` is the pre-gate's
answer, not this model's (its rows are those of parseable programs). The fitted classifier
is kept as a :class:`~wmrl_env.world_models.programs.tree_classifier.TreeClassifier` (the same
probabilities as scikit-learn's), so a saved model is a ``.npz`` file with no pickle that
loads under any scikit-learn.

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

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wmrl_env.world_models.artifact_file import is_state_file, read_state, write_state
from wmrl_env.world_models.outcomes import STATUSES, UNKNOWN_ERROR
from wmrl_env.world_models.programs.pretraining import one_thread
from wmrl_env.world_models.programs.program_features import PROGRAM_FEATURE_NAMES
from wmrl_env.world_models.programs.tree_classifier import TreeClassifier

__all__ = ["FORMAT_VERSION", "StatusModel", "status_label"]

FORMAT_VERSION = 2
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
        self._status_prior = np.zeros(0)
        self._classifier: TreeClassifier | None = None

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
                self._classifier = TreeClassifier.from_sklearn(classifier.fit(rows, labels))
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
            raw = self._classifier.predict_proba(rows)
            order = [self._classifier.classes.index(label) for label in self.labels]
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
        """Save the fitted model to ``path`` (a ``.npz`` state file, whatever the suffix: no
        pickle), with the program feature names it reads."""
        return write_state(self.to_state(), path)

    def to_state(self, feature_names: Sequence[str] = PROGRAM_FEATURE_NAMES) -> dict:
        """The fitted model as plain values (what :meth:`save` writes), naming the feature
        columns its rows hold."""
        if not self.fitted:
            raise RuntimeError("StatusModel is not fitted: call fit() before save()")
        import sklearn

        return {
            "version": FORMAT_VERSION,
            "sklearn": sklearn.__version__,  # for the record: any scikit-learn loads it
            "program_feature_names": tuple(feature_names),
            "min_count": self.min_count,
            "smoothing": self.smoothing,
            "seed": self.seed,
            "labels": self.labels,
            "prior": self.prior,
            "status_prior": self._status_prior,
            "classifier": self._classifier,
        }

    @classmethod
    def load(cls, path: str | Path) -> StatusModel:
        """Read :meth:`save`'s file (no scikit-learn needed); refused with a clear error when
        it is not a status model of this format or was fitted on other program features."""
        rebuild = "rebuild it (pretrain_ml_status_model(version).save(path))"
        if not Path(path).is_file() or not is_state_file(path):
            raise ValueError(f"{path}: not a saved status model (a .npz state file): {rebuild}")
        return cls.from_state(read_state(path), PROGRAM_FEATURE_NAMES, f"{path}", rebuild)

    @classmethod
    def from_state(
        cls,
        state: dict,
        feature_names: Sequence[str] = PROGRAM_FEATURE_NAMES,
        where: str = "status model",
        rebuild: str = "rebuild it",
    ) -> StatusModel:
        """The model of :meth:`to_state`'s values; refused with a clear error when they are
        not a status model of this format or name other feature columns."""
        if state.get("version") != FORMAT_VERSION or "classifier" not in state:
            raise ValueError(
                f"{where}: status model format {state.get('version')}, this code reads "
                f"{FORMAT_VERSION}: {rebuild}"
            )
        if tuple(state["program_feature_names"]) != tuple(feature_names):
            raise ValueError(f"{where} was trained on other program features: {rebuild}")
        model = cls(min_count=state["min_count"], smoothing=state["smoothing"], seed=state["seed"])
        labels, classifier = tuple(state["labels"]), state["classifier"]
        prior = np.asarray(state["prior"], dtype=np.float64)
        status_prior = np.asarray(state["status_prior"], dtype=np.float64)
        if (
            not labels
            or prior.shape != (len(labels),)
            or status_prior.shape != (len(_PARSEABLE),)
            or (classifier is None) != (len(labels) == 1)
            or not isinstance(classifier, (TreeClassifier, type(None)))
            or (classifier is not None and set(classifier.classes) != set(labels))
        ):
            raise ValueError(f"{where}: inconsistent status model (labels {labels}): {rebuild}")
        model.labels, model.prior, model._status_prior = labels, prior, status_prior
        model._classifier = classifier
        return model
