"""Read a program of the ML suite's open space from its text: its components and every
hyperparameter as a number.

:func:`parse_program` finds the estimator calls of a program's pipeline (``SimpleImputer``,
the scalers and transformers, the feature step, the model) wherever they are written and
maps them onto the grammar's slots (imputer, transform, feature step, model family);
:func:`program_vector` turns that parse into one row of numbers: a one-hot per slot and
each hyperparameter on its natural scale (log10 for rates, counts and strengths), read
from the call's arguments, so a value off the grammar's grid is read as what it is. A
hyperparameter left out takes the library default. Text that names no model of the
grammar parses to ``None``.

Example:
    >>> text = '''model = make_pipeline(
    ...     SimpleImputer(strategy="median"),
    ...     RobustScaler(),
    ...     KNeighborsClassifier(n_neighbors=20, weights="distance"),
    ... )'''
    >>> parsed = parse_program(text)
    >>> parsed.imputer, parsed.transform, parsed.features, parsed.model
    ('median', 'robust', 'none', 'knn')
    >>> row = program_vector(parsed)
    >>> round(float(row[PROGRAM_COLUMNS.index("knn.log_neighbors")]), 3)
    1.301
    >>> parse_program("print('no model here')") is None
    True
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from keyword import iskeyword
from typing import Any

import numpy as np

__all__ = [
    "FAMILY_OF_CLASS",
    "PROGRAM_COLUMNS",
    "ParsedProgram",
    "comment_key",
    "grammar_point",
    "parse_program",
    "program_vector",
]

IMPUTERS = ("none", "median", "mean", "indicator")
TRANSFORMS = ("none", "standard", "robust", "quantile", "log1p", "signed_log")
FEATURE_STEPS = ("none", "poly2", "spline", "select")
FAMILIES = ("linear", "knn", "tree", "forest", "extra_trees", "boosting", "svm")
FAMILY_OF_CLASS: dict[str, str] = {
    "LogisticRegression": "linear",
    "Ridge": "linear",
    "KNeighborsClassifier": "knn",
    "KNeighborsRegressor": "knn",
    "DecisionTreeClassifier": "tree",
    "DecisionTreeRegressor": "tree",
    "RandomForestClassifier": "forest",
    "RandomForestRegressor": "forest",
    "ExtraTreesClassifier": "extra_trees",
    "ExtraTreesRegressor": "extra_trees",
    "HistGradientBoostingClassifier": "boosting",
    "HistGradientBoostingRegressor": "boosting",
    "SVC": "svm",
    "SVR": "svm",
}
_STEPS = (
    "SimpleImputer",
    "StandardScaler",
    "RobustScaler",
    "QuantileTransformer",
    "FunctionTransformer",
    "PolynomialFeatures",
    "SplineTransformer",
    "SelectPercentile",
)
_CALLED_REVERSED = {name[::-1]: name for name in (*_STEPS, *FAMILY_OF_CLASS)}
_CALL_REVERSED = re.compile(r"\(([A-Za-z]+)(?!\w)")  # "(" and a whole word before it, reversed
_ENSEMBLE = ("forest", "extra_trees")

PROGRAM_COLUMNS: tuple[str, ...] = (
    *(f"imputer={v}" for v in IMPUTERS),
    *(f"transform={v}" for v in TRANSFORMS),
    *(f"features={v}" for v in FEATURE_STEPS),
    "features.log_spline_knots",
    "features.kept_share",
    *(f"model={v}" for v in FAMILIES),
    "linear.log_strength",
    "knn.log_neighbors",
    "knn.distance_weights",
    "knn.manhattan",
    "tree.log_depth",
    "tree.unlimited_depth",
    "tree.log_min_leaf",
    "ensemble.log_trees",
    "ensemble.log_depth",
    "ensemble.unlimited_depth",
    "ensemble.max_features",
    "ensemble.log_min_leaf",
    "boosting.log_iterations",
    "boosting.log_learning_rate",
    "boosting.log_leaf_nodes",
    "boosting.l2",
    "svm.log_c",
    "svm.log_gamma",
    "svm.scale_gamma",
)
"""The columns of :func:`program_vector` (zeros in the columns of other families)."""
_INDEX = {name: i for i, name in enumerate(PROGRAM_COLUMNS)}
_UNLIMITED_DEPTH = 32.0  # the depth a tree without a limit is read as (log2)


@dataclass(frozen=True)
class ParsedProgram:
    """A program's grammar slots and its model's keyword arguments (literal values)."""

    imputer: str
    transform: str
    features: str
    model: str
    estimator: str
    params: Mapping[str, Any] = field(default_factory=dict)
    spline_knots: float = 5.0
    kept_share: float = 1.0


def _call_arguments(text: str, start: int) -> str:
    """The text between the parenthesis opened at ``start - 1`` and its match (when none
    matches: up to the text's last character, which is left out)."""
    close = text.find(")", start)
    if close >= 0 and text.find("(", start, close) < 0:
        return text[start:close]  # no call nested inside: the first ")" matches
    depth = 1
    for paren in _PARENS.finditer(text, start):
        depth += 1 if paren.group() == "(" else -1
        if not depth:
            return text[start : paren.start()]
    return text[start : len(text) - 1]


_PARENS = re.compile(r"[()]")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_NAME}(?:\.{_NAME})*"
_SPACE = r"[ \t\n]*"
_ITEM = re.compile(
    rf"{_SPACE}(?:({_NAME}){_SPACE}={_SPACE}("
    r"-?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?"  # a float
    r"|-?(?:0|[1-9]\d{0,17})"  # an int
    r'|"[ !#-\[\]-~\t]*"' + r"|'[ -&(-\[\]-~\t]*'"  # a printable ASCII string, no escapes
    rf"|{_DOTTED})"  # a (dotted) name: True, False, None or not a literal
    rf"|({_DOTTED})){_SPACE}(,|\Z)",  # or a positional argument: a (dotted) name
    re.ASCII,
)
_CONSTANTS = {"True": True, "False": False, "None": None}


def _simple_keywords(arguments: str) -> dict[str, Any] | None:
    """What :func:`_keywords` reads from an argument list of (dotted) names followed by
    ``name=value`` pairs, each value a number, a string without escapes or a (dotted)
    name, separated by commas, spaces, tabs and newlines, without parsing it; ``None`` for
    any other argument list."""
    found: dict[str, Any] = {}
    at, named, end = 0, False, len(arguments.rstrip(" \t\n"))
    while at < end:
        item = _ITEM.match(arguments, at)
        if item is None:
            return None
        name, value, positional, separator = item.groups()
        if positional is not None:
            if named or any(iskeyword(part) for part in positional.split(".")):
                return None
        else:
            named = True
            head = value[1] if value[0] == "-" else value[0]
            if iskeyword(name):
                return None
            if head.isdigit() or head == ".":
                is_float = "." in value or "e" in value or "E" in value
                found[name] = float(value) if is_float else int(value)
            elif head in "\"'":
                found[name] = value[1:-1]
            elif value in _CONSTANTS:
                found[name] = _CONSTANTS[value]
            elif any(iskeyword(part) for part in value.split(".")):
                return None
            else:
                found[name] = None  # a name is not a literal
        at = item.end()
        if not separator:
            break
    return found


def _keywords(arguments: str) -> dict[str, Any]:
    """Literal keyword arguments of a call (others, e.g. a lambda, are left out)."""
    simple = _simple_keywords(arguments)
    if simple is not None:
        return simple
    try:
        call = ast.parse(f"f({arguments})", mode="eval").body
    except SyntaxError:
        return {}
    found: dict[str, Any] = {}
    for keyword in getattr(call, "keywords", ()):
        if keyword.arg is None:
            continue
        try:
            found[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:
            found[keyword.arg] = None
    return found


def _calls(text: str) -> list[tuple[str, int]]:
    """The estimator calls of ``text`` in order: each name of :data:`_STEPS` or
    :data:`FAMILY_OF_CLASS` that is a whole word followed by ``(``, and where its arguments
    start. Searched for in the reversed text, where a match starts with ``(``, a character
    the regular expression engine skips to fast."""
    reversed_text, end = text[::-1], len(text)
    calls = [
        (_CALLED_REVERSED[m[1]], end - m.start())
        for m in _CALL_REVERSED.finditer(reversed_text)
        if m[1] in _CALLED_REVERSED
    ]
    calls.reverse()
    return calls


def parse_program(text: str) -> ParsedProgram | None:
    """The grammar reading of ``text`` (see the module doc); ``None`` without a model call."""
    calls = _calls(text)
    models = [(name, end) for name, end in calls if name in FAMILY_OF_CLASS]
    if not models:
        return None
    estimator, model_end = models[-1]
    imputer, transform, features = "none", "none", "none"
    knots, kept = 5.0, 1.0
    after_feature_step = after_function = False
    for name, end in calls:
        if name in FAMILY_OF_CLASS:
            continue
        if name == "SimpleImputer":
            keys = _keywords(_call_arguments(text, end))
            if keys.get("add_indicator"):
                imputer = "indicator"
            else:
                imputer = "mean" if keys.get("strategy") == "mean" else "median"
        elif name == "FunctionTransformer":
            transform = "signed_log" if "sign" in _call_arguments(text, end) else "log1p"
            after_function = True
        elif name in ("RobustScaler", "QuantileTransformer"):
            transform = "robust" if name == "RobustScaler" else "quantile"
        elif name == "StandardScaler":
            if not (after_feature_step or after_function) and transform == "none":
                transform = "standard"
            after_function = False
        elif name == "PolynomialFeatures":
            features, after_feature_step = "poly2", True
        elif name == "SplineTransformer":
            features = "spline"
            knots = float(_number(_keywords(_call_arguments(text, end)).get("n_knots"), 5) or 5)
        elif name == "SelectPercentile":
            features = "select"
            percentile = _number(_keywords(_call_arguments(text, end)).get("percentile"), 10)
            kept = float(percentile or 10) / 100.0
    return ParsedProgram(
        imputer, transform, features, FAMILY_OF_CLASS[estimator], estimator,
        _keywords(_call_arguments(text, model_end)), knots, kept,
    )  # fmt: skip


_ALL_BUT_PARENS = {
    i: None for i in range(128) if chr(i) in "\t\n" or (32 <= i < 127 and chr(i) not in "()")
}  # str.translate keeps the parentheses and the control characters
_DROPPED = re.compile(r"\n[ \t]*(?:#[^\n]*)?(?=\n|\Z)")  # a comment-only or blank line
_RISKY_DROP = re.compile(r"\n[ \t]*#[^\n]*?(?:[()]|sign|coding)")
_ONE_STRING_LINE = re.compile(r"""[^'"#\n]*(\"\"\"|''')[^'"#\n]*\1[^'"#\n]*""")
"""A line that holds one triple-quoted string, opened and closed on it, and no other quote
or ``#``."""


def comment_key(text: str) -> str | None:
    """The text without its comment-only and blank lines (a program that differs from
    another only in such lines has the same key), where dropping them provably
    changes neither :func:`parse_program`'s reading nor whether the text compiles; ``None``
    where that is not certain: a character other than printable ASCII, tabs and newlines, a
    backslash, a triple-quoted string that does not close on its line, a dropped line that
    holds a parenthesis, ``sign`` or ``coding``, or parentheses that do not nest (counted
    everywhere, in strings too, as the reading counts them).

    >>> comment_key("x = SVC(C=1.0)\\n# a note\\n\\n") == comment_key("x = SVC(C=1.0)\\n")
    True
    >>> comment_key("x = SVC(C=1.0)\\n# SVR(C=2.0)\\n") is None
    True
    """
    if not text.isascii() or "\\" in text:
        return None
    parens = text.translate(_ALL_BUT_PARENS)  # and control characters
    if parens.strip("()"):
        return None
    lined = "\n" + text  # every line starts after a newline
    if "#" in text and _RISKY_DROP.search(lined):
        return None
    for mark in ('"""', "'''"):
        at = text.find(mark)
        while at >= 0:  # the lines that hold one
            start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
            end = len(text) if end < 0 else end
            if not _ONE_STRING_LINE.fullmatch(text, start, end):
                return None
            at = text.find(mark, end)
    while "()" in parens:  # what nests empties to nothing
        parens = parens.replace("()", "")
    return None if parens else _DROPPED.sub("", lined)


def _number(value: Any, default: Any) -> Any:
    """``value`` when it is a number, else ``default`` (a program may pass any literal:
    ``max_depth="deep"`` fails when it runs, not when it is read).

    >>> _number(3, None), _number("deep", None), _number(None, 5)
    (3, None, 5)
    """
    return value if isinstance(value, int | float) else default


def _log(value: Any, default: float) -> float:
    try:
        number = float(default if value is None else value)
    except (TypeError, ValueError):
        number = default
    return math.log10(number) if number > 0 else math.log10(default)


def program_vector(parsed: ParsedProgram) -> np.ndarray:
    """One row of :data:`PROGRAM_COLUMNS` for a parsed program."""
    row = np.zeros(len(PROGRAM_COLUMNS))
    row[_INDEX[f"imputer={parsed.imputer}"]] = 1.0
    row[_INDEX[f"transform={parsed.transform}"]] = 1.0
    row[_INDEX[f"features={parsed.features}"]] = 1.0
    row[_INDEX["features.log_spline_knots"]] = (
        math.log10(max(parsed.spline_knots, 2.0)) if parsed.features == "spline" else 0.0
    )
    row[_INDEX["features.kept_share"]] = parsed.kept_share if parsed.features == "select" else 1.0
    row[_INDEX[f"model={parsed.model}"]] = 1.0
    p = parsed.params

    def put(name: str, value: float) -> None:
        row[_INDEX[name]] = value

    if parsed.model == "linear":
        strength = _log(p.get("C"), 1.0) if "C" in p else -_log(p.get("alpha"), 1.0)
        put("linear.log_strength", strength)
    elif parsed.model == "knn":
        put("knn.log_neighbors", _log(p.get("n_neighbors"), 5))
        put("knn.distance_weights", float(p.get("weights") == "distance"))
        put("knn.manhattan", float(p.get("p") == 1))
    elif parsed.model == "tree":
        depth = _number(p.get("max_depth"), None)
        put("tree.log_depth", math.log2(_UNLIMITED_DEPTH if depth is None else max(depth, 1)))
        put("tree.unlimited_depth", float(depth is None))
        put("tree.log_min_leaf", _log(p.get("min_samples_leaf"), 1))
    elif parsed.model in _ENSEMBLE:
        depth = _number(p.get("max_depth"), None)
        put("ensemble.log_trees", _log(p.get("n_estimators"), 100))
        put("ensemble.log_depth", math.log2(_UNLIMITED_DEPTH if depth is None else max(depth, 1)))
        put("ensemble.unlimited_depth", float(depth is None))
        features = p.get("max_features")
        put("ensemble.max_features", float(features) if isinstance(features, int | float) else 1.0)
        put("ensemble.log_min_leaf", _log(p.get("min_samples_leaf"), 1))
    elif parsed.model == "boosting":
        put("boosting.log_iterations", _log(p.get("max_iter"), 100))
        put("boosting.log_learning_rate", _log(p.get("learning_rate"), 0.1))
        put("boosting.log_leaf_nodes", _log(p.get("max_leaf_nodes"), 31))
        put("boosting.l2", float(_number(p.get("l2_regularization"), 0.0) or 0.0))
    elif parsed.model == "svm":
        put("svm.log_c", _log(p.get("C"), 1.0))
        gamma = p.get("gamma")
        scale = not isinstance(gamma, int | float)
        put("svm.log_gamma", 0.0 if scale else _log(gamma, 1.0))
        put("svm.scale_gamma", float(scale))
    return row


def grammar_point(parsed: ParsedProgram, kind: str) -> Any:
    """The grammar's program (:class:`~wmrl_env.envs.ml_tasks.grammar.GrammarProgram`) this
    parse names on a task of ``kind``, or ``None`` when a value is off the grammar's grid
    (the caller compares its rendering with the text: equal text is the grammar's own)."""
    from wmrl_env.envs.ml_tasks.grammar import FAMILIES as GRID
    from wmrl_env.envs.ml_tasks.grammar import GrammarProgram

    features = {"spline": f"spline{parsed.spline_knots:g}", "select": "select50"}.get(
        parsed.features, parsed.features
    )
    values = []
    for name, options in GRID[parsed.model].grid:
        if name == "strength":
            if kind == "regression":
                alpha = parsed.params.get("alpha")
                if alpha not in options:
                    return None
                values.append(options[len(options) - 1 - options.index(alpha)])
            else:
                values.append(parsed.params.get("C"))
        else:
            values.append(parsed.params.get(name))
    try:
        return GrammarProgram(parsed.imputer, parsed.transform, features, parsed.model,
                              tuple(values))  # fmt: skip
    except ValueError:
        return None
