"""Program features: what an ML solution program does, read from its Python syntax tree.

:func:`program_features` parses the program with :mod:`ast` (never runs it) and reports the
estimator it fits (family, classifier or regressor, hyperparameter literals), the
preprocessing steps and their order, how it reads the data (numpy or pandas) and how it
writes predictions (``predict_proba``, ``decision_function`` or ``predict``). Any program an
LLM writes is read the same way as the suite's rendered ones. Called names that no rule
knows land in :data:`HASH_BUCKETS` hashed buckets (the text-hash fallback), so unknown
estimators still differ from each other. A program that does not parse returns ``None``: it
is flagged, never guessed.

Example:
    >>> x = program_features(
    ...     "import pandas as pd\\n"
    ...     "from sklearn.ensemble import RandomForestClassifier\\n"
    ...     "df = pd.read_csv('inputs/train.csv')\\n"
    ...     "model = RandomForestClassifier(n_estimators=300, max_depth=5).fit(df, df)\\n"
    ...     "p = model.predict_proba(df)\\n"
    ... )
    >>> value(x, "family_forest"), value(x, "log_n_estimators"), value(x, "reads_pandas")
    (1.0, 2.477, 1.0)
    >>> program_features("def broken(:") is None
    True
"""

from __future__ import annotations

import ast
import functools
import math
import re
import zlib
from collections import OrderedDict

import numpy as np

from wmrl_env.utils.python_source import parse_program
from wmrl_env.world_models.text import text_key

__all__ = [
    "ESTIMATORS",
    "FAMILIES",
    "HASH_BUCKETS",
    "PROGRAM_FEATURE_NAMES",
    "ProgramFeaturizer",
    "code_key",
    "estimator_role",
    "program_features",
    "value",
]

FAMILIES: dict[str, tuple[str, ...]] = {
    # family -> class-name prefixes or names (matched on the called name)
    "linear": (
        "LogisticRegression",
        "Ridge",
        "Lasso",
        "ElasticNet",
        "LinearRegression",
        "SGDClassifier",
        "SGDRegressor",
        "LinearSVC",
        "LinearSVR",
        "BayesianRidge",
        "HuberRegressor",
        "Perceptron",
        "RidgeClassifier",
        "LinearDiscriminantAnalysis",
    ),
    "knn": ("KNeighborsClassifier", "KNeighborsRegressor", "RadiusNeighbors"),
    "tree": ("DecisionTreeClassifier", "DecisionTreeRegressor", "ExtraTreeClassifier"),
    "forest": (
        "RandomForestClassifier",
        "RandomForestRegressor",
        "ExtraTreesClassifier",
        "ExtraTreesRegressor",
    ),
    "boosting": (
        "HistGradientBoosting",
        "GradientBoosting",
        "AdaBoost",
        "XGB",
        "LGBM",
        "CatBoost",
    ),
    "svm": ("SVC", "SVR", "NuSVC", "NuSVR"),
    "naive_bayes": ("GaussianNB", "BernoulliNB", "MultinomialNB"),
    "mlp": ("MLPClassifier", "MLPRegressor"),
    "dummy": ("DummyClassifier", "DummyRegressor"),
}
_CLASSIFIERS: dict[str, tuple[str, ...]] = {
    # family -> scikit-learn classifiers (``sklearn.base.is_classifier`` is True for each;
    # tests/world_models/test_program_features.py checks this table against scikit-learn)
    "linear": (
        "LogisticRegression",
        "LogisticRegressionCV",
        "RidgeClassifier",
        "RidgeClassifierCV",
        "SGDClassifier",
        "Perceptron",
        "PassiveAggressiveClassifier",
        "LinearSVC",
        "LinearDiscriminantAnalysis",
        "QuadraticDiscriminantAnalysis",
    ),
    "knn": ("KNeighborsClassifier", "RadiusNeighborsClassifier", "NearestCentroid"),
    "tree": ("DecisionTreeClassifier", "ExtraTreeClassifier"),
    "forest": ("RandomForestClassifier", "ExtraTreesClassifier", "BaggingClassifier"),
    "boosting": (
        "HistGradientBoostingClassifier",
        "GradientBoostingClassifier",
        "AdaBoostClassifier",
    ),
    "svm": ("SVC", "NuSVC", "GaussianProcessClassifier"),
    "naive_bayes": ("GaussianNB", "BernoulliNB", "MultinomialNB", "ComplementNB", "CategoricalNB"),
    "mlp": ("MLPClassifier",),
    "dummy": ("DummyClassifier",),
}
_REGRESSORS: dict[str, tuple[str, ...]] = {
    # family -> scikit-learn regressors (``sklearn.base.is_regressor`` is True for each)
    "linear": (
        "Ridge",
        "RidgeCV",
        "Lasso",
        "LassoCV",
        "ElasticNet",
        "ElasticNetCV",
        "LinearRegression",
        "SGDRegressor",
        "LinearSVR",
        "BayesianRidge",
        "ARDRegression",
        "HuberRegressor",
        "TheilSenRegressor",
        "RANSACRegressor",
        "QuantileRegressor",
        "PoissonRegressor",
        "GammaRegressor",
        "TweedieRegressor",
        "Lars",
        "LarsCV",
        "LassoLars",
        "LassoLarsCV",
        "LassoLarsIC",
        "OrthogonalMatchingPursuit",
        "OrthogonalMatchingPursuitCV",
        "PassiveAggressiveRegressor",
    ),
    "knn": ("KNeighborsRegressor", "RadiusNeighborsRegressor"),
    "tree": ("DecisionTreeRegressor", "ExtraTreeRegressor"),
    "forest": ("RandomForestRegressor", "ExtraTreesRegressor", "BaggingRegressor"),
    "boosting": (
        "HistGradientBoostingRegressor",
        "GradientBoostingRegressor",
        "AdaBoostRegressor",
    ),
    "svm": ("SVR", "NuSVR", "KernelRidge", "GaussianProcessRegressor"),
    "mlp": ("MLPRegressor",),
    "dummy": ("DummyRegressor",),
}
ESTIMATORS: dict[str, tuple[str, str]] = {
    **{n: (f, "classifier") for f, names in _CLASSIFIERS.items() for n in names},
    **{n: (f, "regressor") for f, names in _REGRESSORS.items() for n in names},
}
"""Estimator class name -> (family, ``"classifier"`` or ``"regressor"``): the explicit
table, from scikit-learn's own tags. A name it lacks falls back to :data:`FAMILIES`'
prefixes and its suffix (``XGBClassifier``, ``LGBMRegressor``)."""
_SCALERS = ("StandardScaler", "MinMaxScaler", "RobustScaler", "MaxAbsScaler", "Normalizer")
_IMPUTERS = ("SimpleImputer", "KNNImputer", "IterativeImputer")
_ENSEMBLES = ("VotingClassifier", "VotingRegressor", "StackingClassifier", "StackingRegressor")
_SEARCHES = ("GridSearchCV", "RandomizedSearchCV", "cross_val_score", "HalvingGridSearchCV")
_HYPERPARAMETERS = ("C", "alpha", "n_neighbors", "max_depth", "n_estimators", "max_iter")
HASH_BUCKETS = 16

PROGRAM_FEATURE_NAMES: tuple[str, ...] = (
    *(f"family_{family}" for family in FAMILIES),
    "family_unknown",
    "is_classifier",
    "is_regressor",
    "n_estimators_built",
    *(f"log_{name}" for name in _HYPERPARAMETERS),
    "max_depth_unbounded",  # a tree-family estimator without max_depth
    "log_learning_rate",
    "imputes",  # SimpleImputer & co., or pandas fillna
    "scales",
    "log1p",
    "log1p_before_impute",  # log(1 + x) of raw data: NaN for negative x stays NaN
    "poly_degree",
    "pca",
    "one_hot",
    "ensemble",
    "search",
    "reads_numpy",
    "reads_pandas",
    "reads_train",
    "reads_test",
    "writes_predictions",
    "predict_proba",
    "decision_function",
    "predict",
    "casts_labels_to_int",
    "log_lines",
    *(f"name_hash_{i}" for i in range(HASH_BUCKETS)),
)
_INDEX = {name: i for i, name in enumerate(PROGRAM_FEATURE_NAMES)}


def value(x: np.ndarray, name: str) -> float:
    """Feature ``name`` of a :func:`program_features` vector, rounded to 3 decimals."""
    return round(float(x[_INDEX[name]]), 3)


def _called_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


@functools.lru_cache(maxsize=4096)
def _family(name: str) -> str | None:
    if name in ESTIMATORS:
        return ESTIMATORS[name][0]
    for family, prefixes in FAMILIES.items():
        if any(name.startswith(prefix) for prefix in prefixes):
            return family
    return None


def _number(node: ast.expr) -> float | None:
    """A numeric literal (``3``, ``-1.5``, ``1e-3``), ``None`` as NaN; anything else None."""
    if isinstance(node, ast.Constant):
        if node.value is None:
            return math.nan
        if isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    return None


def _log(x: float) -> float:
    return math.log10(x) if x > 0 else math.nan


def program_features(program: str) -> np.ndarray | None:
    """The feature vector of ``program`` (:data:`PROGRAM_FEATURE_NAMES`), or ``None`` when
    it is not valid Python."""
    tree = parse_program(program)
    if tree is None:
        return None
    out = np.zeros(len(PROGRAM_FEATURE_NAMES))
    for name in _HYPERPARAMETERS:
        out[_INDEX[f"log_{name}"]] = math.nan
    out[_INDEX["log_learning_rate"]] = math.nan

    def put(name: str, number: float) -> None:
        out[_INDEX[name]] = number

    estimators: list[tuple[str, ast.Call]] = []
    order: list[str] = []  # preprocessing steps in source order
    calls, strings = _calls_and_strings(tree)
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    may_log1p = "log1p" in program  # no call can mention a name the text lacks
    for call in calls:
        name = _called_name(call)
        family = _family(name)
        if family is not None:
            estimators.append((family, call))
        elif name in _IMPUTERS or name == "fillna":
            order.append("impute")
        elif name in _SCALERS:
            put("scales", 1.0)
        elif name == "PolynomialFeatures":
            degree = next((_number(k.value) for k in call.keywords if k.arg == "degree"), None)
            if degree is None and call.args:
                degree = _number(call.args[0])
            put("poly_degree", max(out[_INDEX["poly_degree"]], degree or 2.0))
        elif name == "PCA" or name == "TruncatedSVD":
            put("pca", 1.0)
        elif name in ("OneHotEncoder", "get_dummies"):
            put("one_hot", 1.0)
        elif name in _ENSEMBLES:
            put("ensemble", 1.0)
        elif name in _SEARCHES:
            put("search", 1.0)
        elif name in ("genfromtxt", "loadtxt"):
            put("reads_numpy", 1.0)
        elif name == "read_csv":
            put("reads_pandas", 1.0)
        elif name in ("predict_proba", "decision_function", "predict"):
            put(name, 1.0)
        elif name in ("savetxt", "to_csv", "write", "writerow", "writerows"):
            put("writes_predictions", 1.0)
        elif name == "astype" and any(
            (isinstance(a, ast.Name) and a.id == "int") or _is_str(a, "int") for a in call.args
        ):
            put("casts_labels_to_int", 1.0)
        elif name:
            bucket = zlib.crc32(name.encode()) % HASH_BUCKETS
            out[_INDEX[f"name_hash_{bucket}"]] += 1.0
        if may_log1p and _mentions(call, "log1p"):
            order.append("log1p")
    if "log1p" in order:
        put("log1p", 1.0)
        first_impute = order.index("impute") if "impute" in order else len(order)
        put("log1p_before_impute", float(order.index("log1p") < first_impute))
    put("imputes", float("impute" in order))
    put("reads_train", float(any("train.csv" in s for s in strings)))
    put("reads_test", float(any("test.csv" in s for s in strings)))
    if not any("predictions.csv" in s for s in strings):
        put("writes_predictions", 0.0)
    put("log_lines", math.log10(1 + program.count("\n")))
    put("n_estimators_built", float(len(estimators)))
    if not estimators:
        put("family_unknown", 1.0)
        return out
    family, call = estimators[-1]  # the final estimator: the one whose output is written
    put(f"family_{family}", 1.0)
    name = _called_name(call)
    role = estimator_role(name)
    put("is_classifier", float(role == "classifier"))
    put("is_regressor", float(role == "regressor"))
    for keyword in call.keywords:
        number = _number(keyword.value) if keyword.arg else None
        if number is None:
            continue
        if keyword.arg in _HYPERPARAMETERS:
            put(f"log_{keyword.arg}", _log(number))
        elif keyword.arg == "learning_rate":
            put("log_learning_rate", _log(number))
    if name.startswith(("KNeighbors",)) and call.args and _number(call.args[0]) is not None:
        put("log_n_neighbors", _log(_number(call.args[0])))
    if family in ("tree", "forest") and math.isnan(out[_INDEX["log_max_depth"]]):
        put("max_depth_unbounded", 1.0)
    return out


def estimator_role(name: str) -> str | None:
    """``"classifier"``, ``"regressor"`` or None (not known) for an estimator class name.

    >>> estimator_role("GaussianNB"), estimator_role("XGBRegressor"), estimator_role("Foo")
    ('classifier', 'regressor', None)
    """
    if name in ESTIMATORS:
        return ESTIMATORS[name][1]
    if "Classifier" in name or name.startswith("Logistic"):
        return "classifier"
    if "Regressor" in name or "Regression" in name:
        return "regressor"
    return None


_NOT_CHILDREN = frozenset(
    [
        "ctx",
        "op",
        "id",
        "attr",
        "arg",
        "name",
        "asname",
        "module",
        "level",
        "kind",
        "type_comment",
        "conversion",
        "is_async",
    ]
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _calls_and_strings(tree: ast.AST) -> tuple[list[ast.Call], set[str]]:
    """Every call and every string literal in ``tree`` (what ``ast.walk`` would find, with
    the child fields of each node type looked up once: the walk was most of the cost)."""
    calls, strings, stack = [], set(), [tree]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Constant:
            if type(node.value) is str:
                strings.add(node.value)
            continue
        fields = _CHILD_FIELDS.get(kind)
        if fields is None:
            if not isinstance(node, ast.AST):  # a name in Global.names, a None key ...
                continue
            fields = tuple(f for f in kind._fields if f not in _NOT_CHILDREN)
            _CHILD_FIELDS[kind] = fields
        if kind is ast.Call:
            calls.append(node)
        for name in fields:
            child = getattr(node, name, None)
            if type(child) is list:
                stack.extend(child)
            elif child is not None:
                stack.append(child)
    return calls, strings


def _is_str(node: ast.expr, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def _mentions(call: ast.Call, name: str) -> bool:
    """Whether ``call`` is or directly wraps ``name`` (``np.log1p(x)``,
    ``FunctionTransformer(np.log1p)``)."""
    if _called_name(call) == name:
        return True
    return any(
        (isinstance(arg, ast.Attribute) and arg.attr == name)
        or (isinstance(arg, ast.Name) and arg.id == name)
        for arg in [*call.args, *(k.value for k in call.keywords)]
    )


_TRIPLE = re.compile("\"\"\"|'''")


@functools.lru_cache(maxsize=2048)  # a batch's world model and pre-gate both ask
def code_key(program: str) -> str | None:
    """A key of ``program`` that ignores blank lines, comment-only lines and trailing
    spaces outside triple-quoted strings, which change no feature but ``log_lines``; None
    where reading lines that way could be wrong (a backslash continuation; a quote, ``#``
    or backslash on a line beside a triple quote).

    >>> doc = "'''Doc.'''\\n"
    >>> code_key(doc + "x = 1\\n# a note\\n\\ny = 2  \\n") == code_key(doc + "x = 1\\ny = 2")
    True
    >>> code_key("s = '''\\n# kept: inside a string\\n'''") == code_key("s = '''\\n'''")
    False
    """
    if "\\\n" in program:
        return None
    kept, inside = [], None
    for line in program.splitlines():
        if inside is None:
            line = line.rstrip()
            if not line or line.lstrip().startswith("#"):
                continue
        marks = _TRIPLE.findall(line) if '"""' in line or "'''" in line else None
        if marks:
            rest = _TRIPLE.sub("", line)
            if any(c in rest for c in "'\"#\\"):
                return None
            for mark in marks:
                if inside is None:
                    inside = mark
                elif mark == inside:
                    inside = None
        kept.append(line)
    return text_key("\n".join(kept))


class ProgramFeaturizer:
    """:func:`program_features` with an LRU cache keyed by a hash of the program text, and
    a second one keyed by :func:`code_key`: a program that differs from one seen before
    only in comment lines or blank lines is not parsed again (its ``log_lines`` is its
    own). ``hits`` counts exact repeats, ``code_hits`` the others, ``parsed`` the programs
    read from their syntax tree.

    >>> featurize = ProgramFeaturizer(max_entries=2)
    >>> featurize(["x = 1", "def f(:"])[1] is None, featurize.hits
    (True, 0)
    >>> _ = featurize(["# a comment\\nx = 1"]); featurize.code_hits, featurize.parsed
    (1, 2)
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.hits = 0
        self.code_hits = 0
        self.parsed = 0
        self._cache: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self._code: OrderedDict[str, np.ndarray | None] = OrderedDict()

    def __call__(self, programs: list[str]) -> list[np.ndarray | None]:
        out = []
        for program in programs:
            key = text_key(program)
            if key in self._cache:
                self._cache.move_to_end(key)
                self.hits += 1
            else:
                self._cache[key] = self._features(program)
                if len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
            out.append(self._cache[key])
        return out

    def _features(self, program: str) -> np.ndarray | None:
        code = code_key(program)
        if code is None or code not in self._code:
            self.parsed += 1
        if code is None:
            return program_features(program)
        if code not in self._code:
            self._code[code] = program_features(program)
            if len(self._code) > self.max_entries:
                self._code.popitem(last=False)
            return self._code[code]
        self._code.move_to_end(code)
        self.code_hits += 1
        shared = self._code[code]
        if shared is None:
            return None
        features = shared.copy()
        features[_INDEX["log_lines"]] = math.log10(1 + program.count("\n"))
        return features
