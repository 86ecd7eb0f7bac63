"""Solution programs beyond the 72-program grid, composed from the grid's own pieces.

A :class:`ProgramDraft` is a preprocessing pipeline (an ordered tuple of the grid's steps:
``impute``, ``scale``, ``log1p``, ``poly2``), a model family and its constructor arguments.
The grid's 72 programs are drafts too (:meth:`ProgramDraft.from_spec`), and
:func:`render_draft` renders them to exactly the text of
:func:`~wmrl_env.envs.ml_tasks.render_program`, so their hash finds their row in the
execution table; every other draft (other hyperparameter values, other step orders) renders
in the same layout with ``custom`` in its title. :func:`sample_draft` draws from this wider
space: the behaviour-cloning corpus of the code policy.

Example:
    >>> from wmrl_env.envs.ml_tasks import ProgramSpec, render_program
    >>> spec = ProgramSpec("standardize", "forest", "mid")
    >>> render_draft(ProgramDraft.from_spec(spec, "binary"), "binary") == render_program(
    ...     spec, "binary")
    True
    >>> draft = ProgramDraft(("scale", "impute"), "knn", "n_neighbors=25")
    >>> draft.grid_spec("binary") is None, draft.label
    (True, 'scale+impute-knn-custom')
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PREPROCESSING_ORDERS",
    "STEPS",
    "ProgramDraft",
    "model_arguments",
    "render_draft",
    "sample_draft",
]

#: step name -> (import line, constructor), the grid's pieces
STEPS: dict[str, tuple[str, str]] = {
    "impute": ("from sklearn.impute import SimpleImputer", 'SimpleImputer(strategy="median")'),
    "scale": ("from sklearn.preprocessing import StandardScaler", "StandardScaler()"),
    "log1p": (
        "from sklearn.preprocessing import FunctionTransformer",
        "FunctionTransformer(np.log1p)",
    ),
    "poly2": (
        "from sklearn.preprocessing import PolynomialFeatures",
        "PolynomialFeatures(degree=2, include_bias=False)",
    ),
}

_GRID_ORDERS: dict[tuple[str, ...], str] = {
    (): "none",
    ("impute", "scale"): "standardize",
    ("log1p", "scale"): "log1p",
    ("impute", "scale", "poly2", "scale"): "poly2",
}

#: every step order a draft may use: the grid's four, then seven recombinations
PREPROCESSING_ORDERS: tuple[tuple[str, ...], ...] = (
    *_GRID_ORDERS,
    ("scale", "impute"),
    ("impute",),
    ("scale",),
    ("impute", "log1p", "scale"),
    ("log1p", "impute", "scale"),
    ("impute", "poly2", "scale"),
    ("impute", "scale", "poly2"),
)

# family -> (module, classifier, regressor)
_CLASSES: dict[str, tuple[str, str, str]] = {
    "linear": ("sklearn.linear_model", "LogisticRegression", "Ridge"),
    "knn": ("sklearn.neighbors", "KNeighborsClassifier", "KNeighborsRegressor"),
    "tree": ("sklearn.tree", "DecisionTreeClassifier", "DecisionTreeRegressor"),
    "forest": ("sklearn.ensemble", "RandomForestClassifier", "RandomForestRegressor"),
    "boosting": (
        "sklearn.ensemble",
        "HistGradientBoostingClassifier",
        "HistGradientBoostingRegressor",
    ),
    "svm": ("sklearn.svm", "SVC", "SVR"),
}


def _depth(depth: int | None) -> str:
    return "" if depth is None else f"max_depth={depth}, "


def model_arguments(model: str, kind: str) -> tuple[str, ...]:
    """Every constructor-argument string a draft of ``model`` may use on a ``kind`` task (the
    grid's three among them, in the grid's spelling).

    >>> model_arguments("svm", "binary")
    ('C=0.1', 'C=1.0', 'C=10.0', 'C=100.0')
    """
    if model == "linear":
        if kind == "regression":
            return tuple(f"alpha={a}" for a in (100.0, 10.0, 1.0, 0.1, 0.01))
        return tuple(f"C={c}, max_iter=1000" for c in (0.01, 0.1, 1.0, 10.0, 100.0))
    if model == "knn":
        return tuple(f"n_neighbors={k}" for k in (3, 5, 10, 15, 25, 50))
    if model == "tree":
        return tuple(f"{_depth(d)}random_state=0" for d in (2, 3, 4, 6, 8, 12, None))
    if model == "forest":
        return tuple(
            f"n_estimators={n}, {_depth(d)}random_state=0"
            for n, d in itertools.product((20, 60, 100, 200), (3, 5, 8, None))
        )
    if model == "boosting":
        return tuple(
            f"max_iter={n}, learning_rate={r}, random_state=0"
            for n, r in itertools.product((20, 60, 100, 200), (0.05, 0.1, 0.2))
        )
    if model == "svm":
        return tuple(f"C={c}" for c in (0.1, 1.0, 10.0, 100.0))
    raise ValueError(f"model must be one of {tuple(_CLASSES)}, got {model!r}")


@dataclass(frozen=True)
class ProgramDraft:
    """A solution program's choices: ``steps`` (from :data:`STEPS`), ``model`` (a grid family)
    and ``arguments`` (its constructor's keyword arguments, as source text)."""

    steps: tuple[str, ...]
    model: str
    arguments: str

    def __post_init__(self) -> None:
        unknown = [s for s in self.steps if s not in STEPS]
        if unknown or self.model not in _CLASSES:
            raise ValueError(f"unknown steps {unknown} or model {self.model!r}")

    @classmethod
    def from_spec(cls, spec: object, kind: str) -> ProgramDraft:
        """The draft of a grid :class:`~wmrl_env.envs.ml_tasks.ProgramSpec` on ``kind``."""
        from wmrl_env.envs.ml_tasks.programs import CAPACITIES

        steps = next(o for o, name in _GRID_ORDERS.items() if name == spec.preprocessing)
        arguments = _grid_arguments(spec.model, kind)[CAPACITIES.index(spec.capacity)]
        return cls(steps, spec.model, arguments)

    def grid_spec(self, kind: str) -> object | None:
        """The grid's ``ProgramSpec`` this draft equals on ``kind``, or ``None``."""
        from wmrl_env.envs.ml_tasks.programs import CAPACITIES, ProgramSpec

        grid = _grid_arguments(self.model, kind)
        if self.steps not in _GRID_ORDERS or self.arguments not in grid:
            return None
        capacity = CAPACITIES[grid.index(self.arguments)]
        return ProgramSpec(_GRID_ORDERS[self.steps], self.model, capacity)

    @property
    def preprocessing(self) -> str:
        """The grid's name for the steps, or the steps joined by ``+``."""
        return _GRID_ORDERS.get(self.steps) or "+".join(self.steps)

    @property
    def label(self) -> str:
        """``preprocessing-model-custom`` (the title of a draft outside the grid)."""
        return f"{self.preprocessing}-{self.model}-custom"


def _grid_arguments(model: str, kind: str) -> tuple[str, str, str]:
    """The grid's low / mid / high arguments (read from the suite, the single source)."""
    from wmrl_env.envs.ml_tasks.programs import _FAMILIES

    family = _FAMILIES[model]
    if kind == "regression" and family.regressor_kwargs is not None:
        return family.regressor_kwargs
    return family.classifier_kwargs


def render_draft(draft: ProgramDraft, kind: str) -> str:
    """The program text of ``draft`` on a ``kind`` task; a grid draft renders exactly as
    :func:`~wmrl_env.envs.ml_tasks.render_program` renders its spec, any other in the same
    layout (the suite's program of the same family without preprocessing, with this draft's
    title, imports and model block spliced in)."""
    from wmrl_env.envs.ml_tasks import ProgramSpec, render_program

    spec = draft.grid_spec(kind)
    if spec is not None:
        return render_program(spec, kind)
    base = render_program(ProgramSpec("none", draft.model, "low"), kind)
    module, classifier, regressor = _CLASSES[draft.model]
    name = regressor if kind == "regression" else classifier
    model_import = f"from {module} import {name}"
    model_call = f"{name}({draft.arguments})"
    imports = {STEPS[s][0] for s in draft.steps} | {model_import}
    if draft.steps:
        imports.add("from sklearn.pipeline import make_pipeline")
        calls = [STEPS[s][1] for s in draft.steps] + [model_call]
        model_block = "model = make_pipeline(\n" + "".join(f"    {c},\n" for c in calls) + ")"
    else:
        model_block = f"model = {model_call}"
    low_call = f"{name}({_grid_arguments(draft.model, kind)[0]})"
    body = base.split("\n", 1)[1]
    body = body.replace(f"{model_import}\n", "\n".join(sorted(imports)) + "\n", 1)
    body = body.replace(f"model = {low_call}\n", f"{model_block}\n", 1)
    title = (
        f'"""Solution {draft.label}: {draft.preprocessing} preprocessing, {draft.model} model, '
        f'custom capacity ({kind})."""'
    )
    return f"{title}\n{body}"


def sample_draft(rng: np.random.Generator, kind: str, grid_share: float = 0.5) -> ProgramDraft:
    """A random draft for a ``kind`` task: a uniform grid program with probability
    ``grid_share``, else uniform steps order, family and arguments from the wider space.

    >>> draft = sample_draft(np.random.default_rng(0), "regression", grid_share=1.0)
    >>> draft.grid_spec("regression") is not None
    True
    """
    if not 0.0 <= grid_share <= 1.0:
        raise ValueError(f"grid_share must be in [0, 1], got {grid_share}")
    model = tuple(_CLASSES)[int(rng.integers(len(_CLASSES)))]
    if rng.random() < grid_share:
        orders, arguments = tuple(_GRID_ORDERS), _grid_arguments(model, kind)
    else:
        orders, arguments = PREPROCESSING_ORDERS, model_arguments(model, kind)
    steps = orders[int(rng.integers(len(orders)))]
    return ProgramDraft(steps, model, arguments[int(rng.integers(len(arguments)))])
