"""The open program space: a grammar of preprocessing, feature construction, model family
and finely stepped hyperparameters, rendered as readable Python.

A :class:`GrammarProgram` is one choice per slot:

* ``imputer``: ``none``, ``median``, ``mean`` or ``indicator`` (median plus a 0/1 column per
  feature that had missing values: missingness as a feature);
* ``transform``: ``none``, ``standard``, ``robust`` (median / IQR), ``quantile`` (to a normal
  shape), ``log1p`` (log(1 + x), then standard scaling) or ``signed_log``
  (sign(x) log(1 + |x|), then standard scaling: tames heavy tails on both sides);
* ``features``: ``none``, ``poly2`` (all degree-2 products, then scaling), ``spline5`` /
  ``spline9`` (cubic B-splines per feature, 5 or 9 knots) or ``select50`` (the half of the
  columns with the strongest univariate F-statistic);
* ``model``: a family of :data:`FAMILIES` with a value for each of its hyperparameters.

The space holds 120 pipelines x 1,163 models = 139,560 programs per task kind
(:func:`space_size`); :func:`sample_programs` draws a seeded sample, slot by slot. The 72
programs of the structured space (:mod:`~.programs`) are the named subset :func:`v1_subset`:
:meth:`GrammarProgram.from_v1` maps one to its grammar point, which renders to the same text
as :func:`~.programs.render_program` (the same program hash, so the first suite's table rows
are its executions).

Example:
    >>> from wmrl_env.envs.ml_tasks.programs import ProgramSpec, render_program
    >>> spec = ProgramSpec("standardize", "forest", "mid")
    >>> GrammarProgram.from_v1(spec).render("binary") == render_program(spec, "binary")
    True
    >>> program = sample_programs(1, seed=0)[0]
    >>> program == GrammarProgram.from_id(program.id)
    True
    >>> space_size()
    139560
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .datasets import TaskKind
from .programs import _PREDICT_LINE, ProgramSpec, all_programs

__all__ = [
    "FAMILIES",
    "FEATURES",
    "IMPUTERS",
    "TRANSFORMS",
    "GrammarProgram",
    "all_grammar_programs",
    "sample_programs",
    "space_size",
    "v1_subset",
]

IMPUTERS: tuple[str, ...] = ("none", "median", "mean", "indicator")
TRANSFORMS: tuple[str, ...] = ("none", "standard", "robust", "quantile", "log1p", "signed_log")
FEATURES: tuple[str, ...] = ("none", "poly2", "spline5", "spline9", "select50")

_SCALER = ("from sklearn.preprocessing import StandardScaler", "StandardScaler()")
_IMPUTE = "from sklearn.impute import SimpleImputer"
_FUNCTION = "from sklearn.preprocessing import FunctionTransformer"
_SPLINE = "from sklearn.preprocessing import SplineTransformer"
_IMPUTER_STEPS: dict[str, tuple[tuple[str, str], ...]] = {
    "none": (),
    "median": ((_IMPUTE, 'SimpleImputer(strategy="median")'),),
    "mean": ((_IMPUTE, 'SimpleImputer(strategy="mean")'),),
    "indicator": ((_IMPUTE, 'SimpleImputer(strategy="median", add_indicator=True)'),),
}
_TRANSFORM_STEPS: dict[str, tuple[tuple[str, str], ...]] = {
    "none": (),
    "standard": (_SCALER,),
    "robust": (("from sklearn.preprocessing import RobustScaler", "RobustScaler()"),),
    "quantile": (
        (
            "from sklearn.preprocessing import QuantileTransformer",
            'QuantileTransformer(n_quantiles=200, output_distribution="normal")',
        ),
    ),
    "log1p": ((_FUNCTION, "FunctionTransformer(np.log1p)"), _SCALER),
    "signed_log": (
        (_FUNCTION, "FunctionTransformer(lambda x: np.sign(x) * np.log1p(np.abs(x)))"),
        _SCALER,
    ),
}
_FEATURE_STEPS: dict[str, tuple[tuple[str, str], ...]] = {
    "none": (),
    "poly2": (
        (
            "from sklearn.preprocessing import PolynomialFeatures",
            "PolynomialFeatures(degree=2, include_bias=False)",
        ),
        _SCALER,
    ),
    "spline5": ((_SPLINE, "SplineTransformer(n_knots=5)"),),
    "spline9": ((_SPLINE, "SplineTransformer(n_knots=9)"),),
    "select50": (),  # kind-dependent, see _feature_steps
}

_LOG_GRID = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
_DEPTHS = (3, 4, 6, 8, 12, 16, None)
_ENSEMBLE = {
    "n_estimators": (20, 40, 60, 100, 200, 300),
    "max_depth": _DEPTHS,
    "max_features": (None, 0.3, 0.6),
    "min_samples_leaf": (None, 3, 10),
}


@dataclass(frozen=True)
class Family:
    """A model family: its classes, hyperparameter grids and the arguments always passed.

    A hyperparameter value ``None`` means the library default and is not written out (so
    the first suite's programs render unchanged). ``strength`` (linear models) is C for
    logistic regression and its reverse, alpha = grid[-1 - i], for ridge regression.
    """

    module: str
    classifier: str
    regressor: str
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    fixed: str = ""

    @property
    def size(self) -> int:
        return int(np.prod([len(values) for _, values in self.grid]))


FAMILIES: dict[str, Family] = {
    "linear": Family(
        "sklearn.linear_model", "LogisticRegression", "Ridge", (("strength", _LOG_GRID),)
    ),
    "knn": Family(
        "sklearn.neighbors",
        "KNeighborsClassifier",
        "KNeighborsRegressor",
        (
            ("n_neighbors", (1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 75, 100)),
            ("weights", (None, "distance")),
            ("p", (None, 1)),
        ),
    ),
    "tree": Family(
        "sklearn.tree",
        "DecisionTreeClassifier",
        "DecisionTreeRegressor",
        (
            ("max_depth", (2, 3, 4, 5, 6, 8, 10, 12, None)),
            ("min_samples_leaf", (None, 2, 5, 10, 20, 50)),
        ),
        fixed="random_state=0",
    ),
    "forest": Family(
        "sklearn.ensemble",
        "RandomForestClassifier",
        "RandomForestRegressor",
        tuple(_ENSEMBLE.items()),
        fixed="random_state=0",
    ),
    "extra_trees": Family(
        "sklearn.ensemble",
        "ExtraTreesClassifier",
        "ExtraTreesRegressor",
        tuple(_ENSEMBLE.items()),
        fixed="random_state=0",
    ),
    "boosting": Family(
        "sklearn.ensemble",
        "HistGradientBoostingClassifier",
        "HistGradientBoostingRegressor",
        (
            ("max_iter", (20, 40, 60, 100, 200, 400)),
            ("learning_rate", (0.02, 0.05, 0.1, 0.2, 0.3)),
            ("max_leaf_nodes", (None, 7, 15, 63)),
            ("l2_regularization", (None, 1.0)),
        ),
        fixed="random_state=0",
    ),
    "svm": Family(
        "sklearn.svm",
        "SVC",
        "SVR",
        (
            ("C", (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)),
            ("gamma", (None, 0.01, 0.03, 0.1, 0.3, 1.0)),
        ),
    ),
}

# the first suite's capacity levels, as grammar values
_V1_PARAMS: dict[str, tuple[dict[str, Any], ...]] = {
    "linear": ({"strength": 0.01}, {"strength": 1.0}, {"strength": 100.0}),
    "knn": ({"n_neighbors": 50}, {"n_neighbors": 15}, {"n_neighbors": 3}),
    "tree": ({"max_depth": 2}, {"max_depth": 6}, {"max_depth": None}),
    "forest": (
        {"n_estimators": 20, "max_depth": 3},
        {"n_estimators": 60, "max_depth": 8},
        {"n_estimators": 200, "max_depth": None},
    ),
    "boosting": (
        {"max_iter": 20, "learning_rate": 0.05},
        {"max_iter": 60, "learning_rate": 0.1},
        {"max_iter": 200, "learning_rate": 0.1},
    ),
    "svm": ({"C": 0.1}, {"C": 1.0}, {"C": 100.0}),
}
_V1_PIPELINES = {
    "none": ("none", "none", "none"),
    "standardize": ("median", "standard", "none"),
    "log1p": ("none", "log1p", "none"),
    "poly2": ("median", "standard", "poly2"),
}


@dataclass(frozen=True, order=True)
class GrammarProgram:
    """One program of the open space (see the module docstring for the slots).

    ``params`` holds one value per hyperparameter of the family, in the family's order.
    """

    imputer: str
    transform: str
    features: str
    model: str
    params: tuple[Any, ...]

    def __post_init__(self) -> None:
        for name, options in (
            ("imputer", IMPUTERS),
            ("transform", TRANSFORMS),
            ("features", FEATURES),
            ("model", tuple(FAMILIES)),
        ):
            if getattr(self, name) not in options:
                raise ValueError(f"{name} must be one of {options}, got {getattr(self, name)!r}")
        grid = FAMILIES[self.model].grid
        if len(self.params) != len(grid):
            raise ValueError(f"{self.model} takes {len(grid)} hyperparameters, got {self.params}")
        for (name, values), value in zip(grid, self.params, strict=True):
            if value not in values:
                raise ValueError(f"{self.model} {name} must be one of {values}, got {value!r}")

    @property
    def id(self) -> str:
        """``imputer/transform/features/model:v1,v2,...``, e.g.
        ``median/standard/none/forest:60,8,None,1``."""
        values = ",".join(str(v) for v in self.params)
        return f"{self.imputer}/{self.transform}/{self.features}/{self.model}:{values}"

    @classmethod
    def from_id(cls, program_id: str) -> GrammarProgram:
        try:
            pipeline, values = program_id.split(":")
            imputer, transform, features, model = pipeline.split("/")
            grid = FAMILIES[model].grid
            texts = values.split(",")
            params = tuple(
                _parse_value(text, options) for text, (_, options) in zip(texts, grid, strict=True)
            )
        except (ValueError, KeyError) as error:
            raise ValueError(
                f"not a grammar program id: {program_id!r} (expected "
                f"'imputer/transform/features/model:v1,v2,...'; {error})"
            ) from None
        return cls(imputer, transform, features, model, params)

    @classmethod
    def from_v1(cls, spec: ProgramSpec) -> GrammarProgram:
        """The grammar point of a program of the first suite's 72 (same rendered text)."""
        given = _V1_PARAMS[spec.model][("low", "mid", "high").index(spec.capacity)]
        params = tuple(given.get(name) for name, _ in FAMILIES[spec.model].grid)
        return cls(*_V1_PIPELINES[spec.preprocessing], spec.model, params)

    @property
    def v1_spec(self) -> ProgramSpec | None:
        """The first suite's program this point is, if any."""
        return _v1_names().get(self)

    @property
    def choices(self) -> dict[str, Any]:
        """Every slot and hyperparameter by name (for models that read the choices)."""
        grid = FAMILIES[self.model].grid
        return {
            "imputer": self.imputer,
            "transform": self.transform,
            "features": self.features,
            "model": self.model,
            **{f"{self.model}.{name}": v for (name, _), v in zip(grid, self.params, strict=True)},
        }

    def render(self, kind: TaskKind) -> str:
        """The complete solution program for a task of ``kind`` (deterministic text)."""
        if kind not in _PREDICT_LINE:
            raise ValueError(f"kind must be one of {sorted(_PREDICT_LINE)}, got {kind!r}")
        steps = (
            _IMPUTER_STEPS[self.imputer]
            + _TRANSFORM_STEPS[self.transform]
            + _feature_steps(self.features, kind)
        )
        model_import, model_call = self._model_constructor(kind)
        imports = {line for line, _ in steps} | {model_import}
        if steps:
            imports.add("from sklearn.pipeline import make_pipeline")
            calls = [call for _, call in steps] + [model_call]
            model_block = "model = make_pipeline(\n" + "".join(f"    {c},\n" for c in calls) + ")"
        else:
            model_block = f"model = {model_call}"
        predict = _PREDICT_LINE[kind]
        if kind == "binary" and self.model == "svm":
            predict = "prediction = model.decision_function(X_test)  # score for class 1"
        labels = "y_train = y_train.astype(int)\n" if kind != "regression" else ""
        fmt = '"%d"' if kind == "multiclass" else '"%.10g"'
        return (
            f'"""Solution {self._title(kind)}."""\n'
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

    def _title(self, kind: TaskKind) -> str:
        spec = self.v1_spec
        if spec is not None:  # the named subset keeps its names
            return (
                f"{spec.id}: {spec.preprocessing} preprocessing, {spec.model} model, "
                f"{spec.capacity} capacity ({kind})"
            )
        return (
            f"{self.id}: impute {self.imputer}, transform {self.transform}, features "
            f"{self.features}, {self.model} model ({kind})"
        )

    def _model_constructor(self, kind: TaskKind) -> tuple[str, str]:
        family = FAMILIES[self.model]
        name = family.regressor if kind == "regression" else family.classifier
        arguments = []
        for (parameter, values), value in zip(family.grid, self.params, strict=True):
            if value is None:
                continue
            if parameter == "strength":
                if kind == "regression":
                    arguments.append(f"alpha={values[len(values) - 1 - values.index(value)]!r}")
                else:
                    arguments.append(f"C={value!r}")
            else:
                arguments.append(f"{parameter}={value!r}".replace("'", '"'))
        if self.model == "linear" and kind != "regression":
            arguments.append("max_iter=1000")
        if family.fixed:
            arguments.append(family.fixed)
        return f"from {family.module} import {name}", f"{name}({', '.join(arguments)})"


@functools.cache
def _v1_names() -> dict[GrammarProgram, ProgramSpec]:
    return {GrammarProgram.from_v1(spec): spec for spec in all_programs()}


def _feature_steps(features: str, kind: TaskKind) -> tuple[tuple[str, str], ...]:
    if features != "select50":
        return _FEATURE_STEPS[features]
    statistic = "f_regression" if kind == "regression" else "f_classif"
    return (
        (
            f"from sklearn.feature_selection import SelectPercentile, {statistic}",
            f"SelectPercentile({statistic}, percentile=50)",
        ),
    )


def _parse_value(text: str, options: tuple[Any, ...]) -> Any:
    for option in options:
        if str(option) == text:
            return option
    raise ValueError(f"{text!r} is not one of {options}")


def space_size() -> int:
    """Distinct programs per task kind."""
    pipelines = len(IMPUTERS) * len(TRANSFORMS) * len(FEATURES)
    return pipelines * sum(family.size for family in FAMILIES.values())


def all_grammar_programs() -> Iterator[GrammarProgram]:
    """Every program of the space, pipeline-major (139,560; lazily)."""
    for imputer, transform, features in itertools.product(IMPUTERS, TRANSFORMS, FEATURES):
        for model, family in FAMILIES.items():
            for params in itertools.product(*(values for _, values in family.grid)):
                yield GrammarProgram(imputer, transform, features, model, params)


def sample_programs(n: int, seed: int) -> list[GrammarProgram]:
    """``n`` distinct programs drawn slot by slot (each slot, family and hyperparameter
    uniform), in draw order; the same ``seed`` gives the same list."""
    if not 0 < n <= space_size():
        raise ValueError(f"n must be in [1, {space_size()}], got {n}")
    rng = np.random.default_rng(seed)
    families = tuple(FAMILIES)
    drawn: dict[GrammarProgram, None] = {}
    while len(drawn) < n:
        model = families[rng.integers(len(families))]
        params = tuple(values[rng.integers(len(values))] for _, values in FAMILIES[model].grid)
        program = GrammarProgram(
            IMPUTERS[rng.integers(len(IMPUTERS))],
            TRANSFORMS[rng.integers(len(TRANSFORMS))],
            FEATURES[rng.integers(len(FEATURES))],
            model,
            params,
        )
        drawn.setdefault(program, None)
    return list(drawn)


def v1_subset() -> list[GrammarProgram]:
    """The first suite's 72 programs as grammar points, in :func:`~.programs.all_programs`
    order."""
    return [GrammarProgram.from_v1(spec) for spec in all_programs()]
