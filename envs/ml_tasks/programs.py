"""The structured program space: preprocessing x model family x capacity, rendered to code.

Each choice is a :class:`ProgramSpec`; :func:`render_program` turns it into a complete,
readable solution program for a task kind (numpy + scikit-learn, reads ``inputs/train.csv``
and ``inputs/test.csv``, writes ``predictions.csv``). The space is small enough to execute
exhaustively (72 programs per task) yet its reward landscape has structure: the best program
differs between tasks, capacity matters, and some choices fail on some tasks for real
reasons (``log1p`` of negative features gives NaN that most models reject, ``none`` skips
the imputation that data with missing values needs, and large models on wide quadratic
features can exceed the time limit).

Example:
    >>> spec = ProgramSpec("standardize", "forest", "mid")
    >>> spec.id, spec.index, ProgramSpec.from_index(spec.index) == spec
    ('standardize-forest-mid', 28, True)
    >>> ProgramSpec.from_action([1, 3, 1]) == spec
    True
    >>> "RandomForestClassifier(n_estimators=60, max_depth=8" in render_program(spec, "binary")
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from .datasets import TaskKind

__all__ = [
    "CAPACITIES",
    "MODELS",
    "PREPROCESSINGS",
    "ProgramSpec",
    "all_programs",
    "program_space",
    "render_program",
]

PREPROCESSINGS: tuple[str, ...] = ("none", "standardize", "log1p", "poly2")
MODELS: tuple[str, ...] = ("linear", "knn", "tree", "forest", "boosting", "svm")
CAPACITIES: tuple[str, ...] = ("low", "mid", "high")
_DIMENSIONS = {"preprocessing": PREPROCESSINGS, "model": MODELS, "capacity": CAPACITIES}
_SHAPE = tuple(len(options) for options in _DIMENSIONS.values())


@dataclass(frozen=True, order=True)
class ProgramSpec:
    """One point of the structured program space.

    Attributes:
        preprocessing: ``none`` (raw features, no imputation), ``standardize`` (median
            imputation + standard scaling), ``log1p`` (log(1 + x) + standard scaling, no
            imputation) or ``poly2`` (imputation + scaling + all degree-2 products + scaling).
        model: ``linear`` (ridge / logistic regression), ``knn``, ``tree``, ``forest``
            (random forest), ``boosting`` (histogram gradient boosting) or ``svm`` (RBF kernel).
        capacity: ``low``, ``mid`` or ``high``: regularisation strength, neighbours, depth,
            number of trees or iterations, from most constrained to most flexible.
    """

    preprocessing: str
    model: str
    capacity: str

    def __post_init__(self) -> None:
        for name, options in _DIMENSIONS.items():
            value = getattr(self, name)
            if value not in options:
                raise ValueError(f"{name} must be one of {options}, got {value!r}")

    @property
    def id(self) -> str:
        """``preprocessing-model-capacity``, e.g. ``standardize-forest-mid``."""
        return f"{self.preprocessing}-{self.model}-{self.capacity}"

    @property
    def action(self) -> np.ndarray:
        """The choice as a :func:`program_space` (``MultiDiscrete``) action."""
        return np.array(
            [options.index(getattr(self, name)) for name, options in _DIMENSIONS.items()],
            dtype=np.int64,
        )

    @property
    def index(self) -> int:
        """Position in :func:`all_programs` (row-major over the three choices)."""
        return int(np.ravel_multi_index(tuple(self.action), _SHAPE))

    @classmethod
    def from_index(cls, index: int) -> ProgramSpec:
        if not 0 <= int(index) < int(np.prod(_SHAPE)):
            raise ValueError(f"program index must be in [0, {int(np.prod(_SHAPE))}), got {index}")
        return cls.from_action(np.unravel_index(int(index), _SHAPE))

    @classmethod
    def from_id(cls, program_id: str) -> ProgramSpec:
        parts = program_id.split("-")
        if len(parts) != 3:
            raise ValueError(
                f"program id must look like 'standardize-forest-mid', got {program_id!r}"
            )
        return cls(*parts)

    @classmethod
    def from_action(cls, action: Any) -> ProgramSpec:
        """Accept a spec, an id string, a mapping of names or indices, or three indices."""
        if isinstance(action, ProgramSpec):
            return action
        if isinstance(action, str):
            return cls.from_id(action)
        if isinstance(action, Mapping):
            missing = set(_DIMENSIONS) - set(action)
            if missing:
                raise ValueError(f"structured action lacks {sorted(missing)}")
            return cls(**{name: _choice(name, action[name]) for name in _DIMENSIONS})
        if isinstance(action, (Sequence, np.ndarray)):
            values = list(np.ravel(action)) if isinstance(action, np.ndarray) else list(action)
            if len(values) != len(_DIMENSIONS):
                raise ValueError(f"structured action needs 3 entries, got {values}")
            return cls(*(_choice(n, v) for n, v in zip(_DIMENSIONS, values, strict=True)))
        raise TypeError(
            "a structured action is a ProgramSpec, an id string, a mapping or three indices; "
            f"got {type(action).__name__}"
        )


def _choice(name: str, value: Any) -> str:
    options = _DIMENSIONS[name]
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)) and 0 <= int(value) < len(options):
        return options[int(value)]
    raise ValueError(f"{name} index must be in [0, {len(options)}), got {value!r}")


def program_space(seed: int | None = None) -> spaces.MultiDiscrete:
    """``MultiDiscrete([4, 6, 3])``: preprocessing, model and capacity indices."""
    return spaces.MultiDiscrete(np.array(_SHAPE, dtype=np.int64), seed=seed)


def all_programs() -> list[ProgramSpec]:
    """Every program of the space, in :attr:`ProgramSpec.index` order."""
    return [ProgramSpec.from_index(i) for i in range(int(np.prod(_SHAPE)))]


# ------------------------------------------------------------------------------- rendering

_PREPROCESSING_STEPS: dict[str, tuple[tuple[str, str], ...]] = {
    # (import line, constructor)
    "none": (),
    "standardize": (
        ("from sklearn.impute import SimpleImputer", 'SimpleImputer(strategy="median")'),
        ("from sklearn.preprocessing import StandardScaler", "StandardScaler()"),
    ),
    "log1p": (
        ("from sklearn.preprocessing import FunctionTransformer", "FunctionTransformer(np.log1p)"),
        ("from sklearn.preprocessing import StandardScaler", "StandardScaler()"),
    ),
    "poly2": (
        ("from sklearn.impute import SimpleImputer", 'SimpleImputer(strategy="median")'),
        ("from sklearn.preprocessing import StandardScaler", "StandardScaler()"),
        (
            "from sklearn.preprocessing import PolynomialFeatures",
            "PolynomialFeatures(degree=2, include_bias=False)",
        ),
        ("from sklearn.preprocessing import StandardScaler", "StandardScaler()"),
    ),
}


@dataclass(frozen=True)
class _Family:
    """A model family: its classes and constructor arguments per capacity level."""

    module: str
    classifier: str
    regressor: str
    classifier_kwargs: tuple[str, str, str]
    regressor_kwargs: tuple[str, str, str] | None = None  # None: same as the classifier's


_FAMILIES: dict[str, _Family] = {
    "linear": _Family(
        "sklearn.linear_model",
        "LogisticRegression",
        "Ridge",
        ("C=0.01, max_iter=1000", "C=1.0, max_iter=1000", "C=100.0, max_iter=1000"),
        ("alpha=100.0", "alpha=1.0", "alpha=0.01"),
    ),
    "knn": _Family(
        "sklearn.neighbors",
        "KNeighborsClassifier",
        "KNeighborsRegressor",
        ("n_neighbors=50", "n_neighbors=15", "n_neighbors=3"),
    ),
    "tree": _Family(
        "sklearn.tree",
        "DecisionTreeClassifier",
        "DecisionTreeRegressor",
        ("max_depth=2, random_state=0", "max_depth=6, random_state=0", "random_state=0"),
    ),
    "forest": _Family(
        "sklearn.ensemble",
        "RandomForestClassifier",
        "RandomForestRegressor",
        (
            "n_estimators=20, max_depth=3, random_state=0",
            "n_estimators=60, max_depth=8, random_state=0",
            "n_estimators=200, random_state=0",
        ),
    ),
    "boosting": _Family(
        "sklearn.ensemble",
        "HistGradientBoostingClassifier",
        "HistGradientBoostingRegressor",
        (
            "max_iter=20, learning_rate=0.05, random_state=0",
            "max_iter=60, learning_rate=0.1, random_state=0",
            "max_iter=200, learning_rate=0.1, random_state=0",
        ),
    ),
    "svm": _Family("sklearn.svm", "SVC", "SVR", ("C=0.1", "C=1.0", "C=100.0")),
}

_PREDICT_LINE = {
    "binary": "prediction = model.predict_proba(X_test)[:, 1]  # score for class 1",
    "multiclass": "prediction = model.predict(X_test)",
    "regression": "prediction = model.predict(X_test)",
}


def _model_constructor(spec: ProgramSpec, kind: TaskKind) -> tuple[str, str]:
    family = _FAMILIES[spec.model]
    level = CAPACITIES.index(spec.capacity)
    if kind == "regression":
        name, kwargs = family.regressor, family.regressor_kwargs or family.classifier_kwargs
    else:
        name, kwargs = family.classifier, family.classifier_kwargs
    return f"from {family.module} import {name}", f"{name}({kwargs[level]})"


def render_program(spec: ProgramSpec, kind: TaskKind) -> str:
    """The solution program for ``spec`` on a task of the given kind (deterministic text)."""
    if kind not in _PREDICT_LINE:
        raise ValueError(f"kind must be one of {sorted(_PREDICT_LINE)}, got {kind!r}")
    steps = _PREPROCESSING_STEPS[spec.preprocessing]
    model_import, model_call = _model_constructor(spec, kind)
    imports = {line for line, _ in steps} | {model_import}
    if steps:
        imports.add("from sklearn.pipeline import make_pipeline")
        calls = [call for _, call in steps] + [model_call]
        model_block = "model = make_pipeline(\n" + "".join(f"    {c},\n" for c in calls) + ")"
    else:
        model_block = f"model = {model_call}"
    predict = _PREDICT_LINE[kind]
    if kind == "binary" and spec.model == "svm":
        predict = "prediction = model.decision_function(X_test)  # score for class 1"
    labels = "y_train = y_train.astype(int)\n" if kind != "regression" else ""
    fmt = '"%d"' if kind == "multiclass" else '"%.10g"'
    return (
        f'"""Solution {spec.id}: {spec.preprocessing} preprocessing, {spec.model} model, '
        f'{spec.capacity} capacity ({kind})."""\n'
        "import numpy as np\n" + "\n".join(sorted(imports)) + "\n\n"
        'train = np.genfromtxt("inputs/train.csv", delimiter=",", skip_header=1, ndmin=2)\n'
        'test = np.genfromtxt("inputs/test.csv", delimiter=",", skip_header=1, ndmin=2)\n'
        "X_train, y_train = train[:, 1:-1], train[:, -1]\n"
        "test_ids, X_test = test[:, 0].astype(int), test[:, 1:]\n"
        f"{labels}\n"
        f"{model_block}\n"
        "model.fit(X_train, y_train)\n"
        f"{predict}\n\n"
        "np.savetxt(\n"
        '    "predictions.csv",\n'
        "    np.column_stack([test_ids, prediction]),\n"
        '    delimiter=",",\n'
        '    header="id,prediction",\n'
        '    comments="",\n'
        f'    fmt=["%d", {fmt}],\n'
        ")\n"
    )
