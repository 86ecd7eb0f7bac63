"""What world models v2 and v3 share in their pretrained part: the boosters, the program
feature scale, the zero-shot spread and how an artifact is saved, checked and loaded
(:class:`ArtifactFormat`: a ``.npz`` file that loads under any scikit-learn).

Example:
    >>> import numpy as np
    >>> rows = np.random.default_rng(0).normal(size=(64, 3))
    >>> with one_thread():
    ...     booster = fit_booster(rows, rows[:, 0], seed=0)
    >>> booster.predict(rows[:2]).shape
    (2,)
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from wmrl_env.world_models.artifact_file import is_state_file, read_state, write_state
from wmrl_env.world_models.programs.program_features import PROGRAM_FEATURE_NAMES
from wmrl_env.world_models.programs.tree_ensemble import TreeEnsemble

__all__ = [
    "ArtifactFormat",
    "fit_booster",
    "one_thread",
    "program_scale",
    "spread_std",
]

Model = TypeVar("Model")


def fit_booster(
    rows: np.ndarray, target: np.ndarray, *, seed: int, spread: bool = False
) -> TreeEnsemble:
    """Histogram gradient boosting (absolute loss, fewer rounds for a ``spread`` model), kept
    as a :class:`TreeEnsemble` (the same predictions, no scikit-learn needed to load). A
    column with no value in ``rows`` is zeroed for the fit: scikit-learn cannot bin it, and
    at prediction time its NaN then takes the majority branch."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    rows = rows.copy()
    rows[:, np.isnan(rows).all(axis=0)] = 0.0
    booster = HistGradientBoostingRegressor(
        loss="absolute_error" if spread else "squared_error",
        max_iter=60 if spread else 150,
        learning_rate=0.08,
        max_leaf_nodes=15,
        min_samples_leaf=10,
        l2_regularization=1.0,
        random_state=seed,
    )
    return TreeEnsemble.from_sklearn(booster.fit(rows, target))


def spread_std(expected: np.ndarray, floor: float) -> np.ndarray:
    """Zero-shot std before calibration: sqrt(pi/2) x the predicted |residual|, at least
    0.2 x ``floor`` (the mean |residual|)."""
    return np.sqrt(np.pi / 2) * np.maximum(expected, 0.2 * floor)


def program_scale(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and spread of the program-feature columns of ``rows`` over their seen values
    (mean 0 and spread 1 for a column never seen or constant)."""
    program = rows[:, : len(PROGRAM_FEATURE_NAMES)]
    seen = ~np.isnan(program)
    count = np.maximum(seen.sum(axis=0), 1)
    mean = np.where(seen, program, 0.0).sum(axis=0) / count
    spread = np.sqrt((np.where(seen, program - mean, 0.0) ** 2).sum(axis=0) / count)
    return mean, np.where(spread > 0, spread, 1.0)


def one_thread() -> Any:
    """Boosting uses OpenMP threads; on a few shared cores they oversubscribe (16x slower)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="openmp")


def _sklearn_version() -> str:
    import sklearn

    return sklearn.__version__


@dataclass(frozen=True)
class ArtifactFormat:
    """How a world model's pretrained part is saved and loaded: one ``.npz`` state file
    (:mod:`~wmrl_env.world_models.artifact_file`, no pickle) holding the format ``version``,
    the program feature names it was fitted with (and, for the record, the scikit-learn that
    fitted it), the constructor's ``settings`` (under their attribute names) and the
    ``learned`` state (saved key -> the attribute it restores). ``backend`` is the
    ``wmrl train-world-model --backend`` that rebuilds the artifact (named when it is refused).
    A pickled artifact of an earlier release still loads under the scikit-learn minor
    version it was saved with; saving it again writes the ``.npz`` format.

    Example:
        >>> import tempfile
        >>> class Mean:
        ...     def __init__(self, task_featurizer, *, seed=0):
        ...         self.seed, self._mean = seed, None
        >>> artifact = ArtifactFormat(7, "mean", settings=("seed",), learned={"mean": "_mean"})
        >>> model = Mean(None, seed=3)
        >>> model._mean = 0.5
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = artifact.save(model, Path(folder) / "mean.npz")
        ...     loaded = artifact.load(Mean, path, None)
        ...     reseeded = artifact.load(Mean, path, None, seed=4)
        >>> loaded.seed, loaded._mean, reseeded.seed
        (3, 0.5, 4)
    """

    version: int
    backend: str
    settings: tuple[str, ...]
    learned: Mapping[str, str]

    def __post_init__(self) -> None:
        header = set(self.header())
        if header & set(self.settings) or (header | set(self.settings)) & set(self.learned):
            raise ValueError("the header, settings and learned keys must not overlap")

    def header(self) -> dict[str, Any]:
        """What every saved artifact records besides the model's own state."""
        return {
            "version": self.version,
            "sklearn": _sklearn_version(),
            "program_feature_names": PROGRAM_FEATURE_NAMES,
        }

    def save(self, model: Any, path: str | Path) -> Path:
        """Save the header, ``model``'s settings and its learned state to ``path`` (``.npz``
        format, whatever the suffix)."""
        state = self.header()
        state.update({name: getattr(model, name) for name in self.settings})
        state.update({key: getattr(model, name) for key, name in self.learned.items()})
        return write_state(state, path)

    def read(self, path: str | Path) -> dict[str, Any]:
        """The state saved at ``path``, refused with a clear error when its format version or
        program features differ (the message names ``wmrl train-world-model --backend
        BACKEND`` to rebuild it). A pickle (an earlier release's format, trusted) must also
        come from this scikit-learn minor version; its boosters are read as
        :class:`TreeEnsemble`."""
        state = read_state(path) if is_state_file(path) else self._read_pickle(path)
        if not isinstance(state, dict) or state.get("version") != self.version:
            found = state.get("version") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"{path}: format version {found}, this code reads {self.version}")
        if tuple(state["program_feature_names"]) != PROGRAM_FEATURE_NAMES:
            raise ValueError(f"{path} was trained on other program features: retrain it")
        return state

    def _read_pickle(self, path: str | Path) -> Any:
        state = pickle.loads(Path(path).read_bytes())
        if not isinstance(state, dict) or "sklearn" not in state:
            return state
        if state["sklearn"].split(".")[:2] != _sklearn_version().split(".")[:2]:
            raise ValueError(
                f"{path} is a pickle saved with scikit-learn {state['sklearn']}, this is "
                f"{_sklearn_version()}: load and save it again under scikit-learn "
                f"{state['sklearn']} (the .npz format loads under any), or retrain it (wmrl "
                f"train-world-model --backend {self.backend})"
            )
        return {
            key: TreeEnsemble.from_sklearn(value) if hasattr(value, "_predictors") else value
            for key, value in state.items()
        }

    def load(
        self,
        cls: Callable[..., Model],
        path: str | Path,
        task_featurizer: Callable[[Any], Any],
        **given: Any,
    ) -> Model:
        """``cls(task_featurizer, **settings)`` with the learned state restored: the saved
        settings, except those ``given`` (a given None keeps the saved one)."""
        unknown = set(given) - set(self.settings)
        if unknown:
            raise TypeError(f"not settings of this artifact: {sorted(unknown)}")
        state = self.read(path)
        settings = {name: state[name] for name in self.settings}
        settings.update({name: value for name, value in given.items() if value is not None})
        model = cls(task_featurizer, **settings)
        for key, name in self.learned.items():
            setattr(model, name, state[key])
        return model
