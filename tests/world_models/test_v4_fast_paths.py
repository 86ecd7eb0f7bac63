"""World model v4's fast paths change no prediction.

The reference path lives here only: the estimator calls found by one alternation of their
names, every argument list read by ``ast.parse``, validity by parsing to a tree and
compiling the tree, no row shared between comment variants, each tree ensemble walked over
the whole batch at once. v4 (and v3, which shares the validity check and the trees) must
predict bit-identically with and without it, on a varied sample of programs (the grammar's
renderings, mutated ones, comment variants, programs that do not parse or compile) and on
random argument lists and texts.
"""

from __future__ import annotations

import ast
import random
import re

import numpy as np
import pytest
from program_sample import program_sample

from wmrl_env.world_models.programs import grammar_features, open_space, program_features
from wmrl_env.world_models.programs.grammar_features import (
    _STEPS,
    FAMILY_OF_CLASS,
    ParsedProgram,
    parse_program,
)
from wmrl_env.world_models.programs.ml_default import load_ml_world_model
from wmrl_env.world_models.programs.tree_ensemble import TreeEnsemble

# ---------------------------------------------------------------- the reference path
_REFERENCE_CALL = re.compile(r"\b(" + "|".join((*_STEPS, *FAMILY_OF_CLASS)) + r")\(")


def reference_call_arguments(text: str, start: int) -> str:
    depth, i = 1, start
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1]


def reference_keywords(arguments: str) -> dict:
    try:
        call = ast.parse(f"f({arguments})", mode="eval").body
    except SyntaxError:
        return {}
    found = {}
    for keyword in getattr(call, "keywords", ()):
        if keyword.arg is None:
            continue
        try:
            found[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:
            found[keyword.arg] = None
    return found


def reference_parse_program(text: str) -> ParsedProgram | None:
    calls = [(m.group(1), reference_call_arguments(text, m.end()))
             for m in _REFERENCE_CALL.finditer(text)]  # fmt: skip
    models = [(name, args) for name, args in calls if name in FAMILY_OF_CLASS]
    if not models:
        return None
    estimator, model_args = models[-1]
    imputer, transform, features = "none", "none", "none"
    knots, kept = 5.0, 1.0
    after_feature_step = after_function = False
    for name, args in calls:
        if name == "SimpleImputer":
            keys = reference_keywords(args)
            if keys.get("add_indicator"):
                imputer = "indicator"
            else:
                imputer = "mean" if keys.get("strategy") == "mean" else "median"
        elif name == "FunctionTransformer":
            transform = "signed_log" if "sign" in args else "log1p"
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
            knots = float(reference_keywords(args).get("n_knots", 5) or 5)
        elif name == "SelectPercentile":
            features = "select"
            kept = float(reference_keywords(args).get("percentile", 10) or 10) / 100.0
    return ParsedProgram(imputer, transform, features, FAMILY_OF_CLASS[estimator], estimator,
                         reference_keywords(model_args), knots, kept)  # fmt: skip


def reference_tree_predict(self: TreeEnsemble, rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    n, trees = len(rows), len(self.roots)
    flat = rows.ravel()
    node = np.tile(self.roots, n)
    row_start = np.repeat(np.arange(n, dtype=np.int64) * self.n_features, trees)
    active = np.flatnonzero(~self.is_leaf[node])
    while len(active):
        at = node[active]
        x = flat[row_start[active] + self.feature[at]]
        go_left = np.where(np.isnan(x), self.missing_left[at], x <= self.threshold[at])
        at = np.where(go_left, self.left[at], self.right[at])
        node[active] = at
        active = active[~self.is_leaf[at]]
    out = np.full(n, self.baseline)
    for contribution in self.value[node].reshape(n, trees).T:
        out += contribution
    return out


def same(a, b) -> bool:
    """Equal values of equal types, recursively (1 is not 1.0, -0.0 is not 0.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, ParsedProgram) and isinstance(b, ParsedProgram):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return type(a) is type(b) and repr(a) == repr(b)


# ---------------------------------------------------------------- the tests
_ATOMS = (
    "C", "=", " = ", "1", "1.5", "-2", "1e3", ".5", "2.", "0", "00", "007", "1_0", "'a'",
    '"b c"', "'(", ")'", "None", "True", "False", "np.inf", "x", "class", "np.None", ",",
    " ", "\n", "\t", "#c\n", "\\", "\u0663", "\u00e9", "'\u00e9'", "(", ")", "*", "**",
    "lambda", "f_classif", "__debug__", "1j", "\x00", "\r", "'\t'", "-", "+", "e", ".",
    "[1]", "'''", "\x0c", "if", "match", "9" * 30,
)  # fmt: skip


def _argument_lists(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if rng.random() < 0.5:  # shaped like a call's arguments
            text = ", ".join(
                rng.choice(("C", "max_depth", "x", "class", "gamma"))
                + rng.choice(("=", " = ", "=\n"))
                + rng.choice(_ATOMS[3:24])
                for _ in range(rng.randint(1, 4))
            )
            if rng.random() < 0.3:
                text = rng.choice(("f_classif, ", "np.log1p,", "class, ")) + text
            if rng.random() < 0.2:
                text += rng.choice((",", ", ", ",\n", ",,", " ,", "x"))
        else:
            text = "".join(rng.choice(_ATOMS) for _ in range(rng.randint(0, 12)))
        out.append(text)
    return out


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
def test_plain_argument_lists_are_read_as_a_parse_reads_them() -> None:
    lists = _argument_lists(20_000, seed=0)
    read = 0
    for text in lists:
        try:
            expected = reference_keywords(text)
        except ValueError:  # null bytes: both raise
            with pytest.raises(ValueError):
                grammar_features._keywords(text)
            continue
        assert same(grammar_features._keywords(text), expected), text
        read += grammar_features._simple_keywords(text) is not None
    assert read > 2_000  # the fast path answered a good share without a parse


def test_calls_are_found_as_the_reference_finds_them() -> None:
    atoms = ("SVC", "SVC(", "SVR", "Ridge(", "Ridg", "eSVC", "SimpleImputer(", "Linear",
             "KNeighborsClassifier", "Svc", "(", ")", " (", "x", "_", "1", ".", "=", "#", "'",
             " ", "\n", "\u00e9", "\u0663", "\u03a9")  # fmt: skip
    rng = random.Random(10)
    found = 0
    for _ in range(30_000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 12)))
        expected = [(m.group(1), m.end()) for m in _REFERENCE_CALL.finditer(text)]
        assert grammar_features._calls(text) == expected, text
        found += bool(expected)
    assert found > 8_000


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
def test_programs_are_parsed_as_the_reference_parses_them() -> None:
    _, programs = program_sample(600, seed=3)
    for text in programs:
        assert same(parse_program(text), reference_parse_program(text)), text


def reference_valid(parsed: ParsedProgram, program: str, task: np.ndarray) -> bool:
    """The grammar's exact rendering is valid; any other text is parsed and compiled."""
    kinds = [k for k in ("binary", "multiclass", "regression")
             if task[open_space.TASK_COLUMNS.index(f"kind_{k}")] == 1.0]  # fmt: skip
    if len(kinds) == 1:
        point = grammar_features.grammar_point(parsed, kinds[0])
        if point is not None and point.render(kinds[0]) == program:
            return True
    return reference_parses(program)


def _reference_path(monkeypatch) -> None:
    monkeypatch.setattr(open_space, "parse_program", reference_parse_program)
    monkeypatch.setattr(open_space, "_valid", reference_valid)
    monkeypatch.setattr(open_space, "_compiles", reference_parses)
    monkeypatch.setattr(TreeEnsemble, "predict", reference_tree_predict)


def _outputs(version: str, contexts: list[str], programs: list[str]) -> list[np.ndarray]:
    model = load_ml_world_model(version)
    half = len(programs) // 2  # the second batch meets the first's caches
    out = []
    for part in (slice(0, half), slice(half, None)):
        o = model.predict_outcomes(contexts[part], programs[part])
        out += [o.status_probs, o.score, o.std, o.expected_reward, o.known, o.error_probs]
        out.append(np.asarray(o.status()))
    p = load_ml_world_model(version).predict(contexts, programs)
    return [*out, p.scores, p.std, np.asarray(p.valid)]


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
@pytest.mark.parametrize("version", ["v4", "v3"])
def test_predictions_are_bit_identical_to_the_reference_path(version, monkeypatch) -> None:
    contexts, programs = program_sample(600, seed=0)
    program_features.code_key.cache_clear()
    fast = _outputs(version, contexts, programs)
    with monkeypatch.context() as patch:
        _reference_path(patch)
        reference = _outputs(version, contexts, programs)
    assert len(programs) > 600
    for got, expected in zip(fast, reference, strict=True):
        np.testing.assert_array_equal(got, expected)
    statuses = set(fast[6].tolist())
    assert {"ok", "does_not_parse", "invalid_output"} <= statuses


def reference_parses(program: str) -> bool:
    """Parse to a tree, then compile the tree (the check before compiling in one step)."""
    try:
        compile(ast.parse(program), "<program>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
def test_text_after_a_rendering_is_checked_alone_exactly() -> None:
    """A program that starts with the grammar's rendering of its parse has only the rest
    compiled: the answer is the whole program's, whatever the rest holds."""
    from wmrl_env.envs.ml_tasks.grammar import sample_programs
    from wmrl_env.envs.ml_tasks.headroom import headroom_task
    from wmrl_env.world_models.programs.open_space_tasks import task_vector

    task = headroom_task("hr_missing_s0")
    vector = task_vector(task.description)
    atoms = ("x = 1", "global model", "global x", "from __future__ import annotations",
             "# -*- coding: latin-1 -*-", "\ufeff", "    ", "\t", "\n", "\n", "\\\n", "\r\n",
             "return 1", "def f():\n    return model", "nonlocal x", "model: int = 1",
             "import *", "from os import *", "(", ")", "'", "#", "\x0c", "\x00", "yield",
             "await x", "x = SVC(C=2.0)", "__debug__ = 1", "del model", "async def g(): pass",
             "print(model)", "if x:", "pass", ".fit()", "\u00e9 = 2", "lambda: 0")  # fmt: skip
    rng = random.Random(4)
    renders = [p.render(task.kind) for p in sample_programs(40, seed=2)]
    checked = 0
    for _ in range(3_000):
        rest = "".join(rng.choice(atoms) + rng.choice(("", "\n")) for _ in range(rng.randint(0, 6)))
        program = rng.choice(renders) + rest
        parsed = parse_program(program)
        if parsed is None:
            continue
        assert open_space._valid(parsed, program, vector) is reference_parses(program), program
        checked += 1
    assert checked > 2_000


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
def test_compiling_in_one_step_answers_as_the_tree_does() -> None:
    from wmrl_env.utils.python_source import parses

    _, programs = program_sample(600, seed=5)
    for program in programs:
        assert parses(program) is reference_parses(program), program


def _comment_variants(programs: list[str], n: int, seed: int) -> list[tuple[str, str]]:
    """(program, the program with comment-only or blank lines added anywhere)."""
    rng = random.Random(seed)
    pieces = ("# a note", "#", "  # (", "# )", "# signed", "# coding: latin-1", "# '''",
              '# """', "# it's", "\t# tab", "", "   ", "# caf\u00e9", "# \\",
              "# x = SVC(C=9)")  # fmt: skip
    out = []
    for _ in range(n):
        program = rng.choice(programs)
        lines = program.split("\n")
        for _ in range(rng.randint(1, 3)):
            lines.insert(rng.randint(0, len(lines)), rng.choice(pieces))
        out.append((program, "\n".join(lines)))
    return out


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
def test_programs_sharing_a_comment_key_are_read_and_compiled_alike() -> None:
    _, programs = program_sample(600, seed=6)
    programs += ['m = SVC(C=1.0, gamma="(")\n', 'x = ")"\nm = SVC(C=1, gamma="(")\n',
                 's = """\n# inside\n"""\nm = SVC(C=2.0)\n', "m = SVC(C=2.0)\n# end"]  # fmt: skip
    shared = 0
    for program, variant in _comment_variants(programs, 6_000, seed=7):
        key = grammar_features.comment_key(variant)
        if key is None or key != grammar_features.comment_key(program):
            continue
        shared += 1
        assert same(parse_program(variant), parse_program(program)), variant
        assert reference_parses(variant) is reference_parses(program), variant
    assert shared > 500


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
def test_comment_variants_after_their_programs_predict_as_read_afresh(monkeypatch) -> None:
    contexts, programs = program_sample(300, seed=8)
    pairs = _comment_variants(programs, 600, seed=9)
    task_of = dict(zip(programs, contexts, strict=False))
    texts = [p for p, _ in pairs] + [v for _, v in pairs]
    tasks = [task_of[p] for p, _ in pairs] * 2
    fast = _outputs("v4", tasks, texts)
    with monkeypatch.context() as patch:
        _reference_path(patch)
        patch.setattr(open_space, "comment_key", lambda text: None)
        reference = _outputs("v4", tasks, texts)
    for got, expected in zip(fast, reference, strict=True):
        np.testing.assert_array_equal(got, expected)
