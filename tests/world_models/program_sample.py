"""A varied, seeded sample of (task description, program text) pairs for exactness tests of
the program world models' fast paths: the grammar's own renderings (on their own kind and on
others), and the same texts mutated every way a parser's fast path could be wrong about
(hyperparameters off the grid or written differently, comments and blank lines anywhere,
line endings, unicode, strings and parentheses in odd places, compile errors, syntax errors,
programs with no model at all).
"""

from __future__ import annotations

import random
import re

from wmrl_env.envs.ml_tasks.grammar import sample_programs
from wmrl_env.envs.ml_tasks.headroom import headroom_task
from wmrl_env.envs.ml_tasks.pool import POOL_TASKS
from wmrl_env.envs.ml_tasks.programs import all_programs, render_program

KINDS = ("binary", "multiclass", "regression")
FIXED = [
    "",
    "\n",
    "# only a comment\n",
    '"""A docstring only."""\n',
    "print(1)\n",
    "def f(:\n    pass\n",
    "return 1\n",
    "x = SVC(C=1.0)\nreturn 1\n",
    "f(a=1, a=2)\n",
    "model = SVC(C=1.0, C=2.0)\n",
    "def f(a, a):\n    pass\n",
    "nonlocal x\n",
    "model = SVC(C=1.0\n",
    'model = SVC(gamma=")")\n',
    "model = SVC(C=1.0)\x00\n",
    "from __future__ import braces\nmodel = SVC()\n",
    "model = Ridge(alpha=10.0)\n",
    "model = make_pipeline(StandardScaler(), KNeighborsRegressor(n_neighbors=7, p=1))\n",
    "model = RandomForestClassifier(n_estimators=50, max_depth=4, max_features='sqrt')\n",
    "model = HistGradientBoostingRegressor(max_iter=30, learning_rate=.2, l2_regularization=1)\n",
    "SVC(C=1e3, gamma=1e-3)",
    "SVC(C=-1, gamma=0)\n",
    "model = SVC(**{'C': 2.0})\n",
    "model = SVC(1.0, kernel='rbf')\n",
    "model = SVC(C=1.0,)\n",
    "model = SVC(,)\n",
    "model = SVC(C=float('2'))\n",
    "model = SVC(C=(2.0))\n",
    "model = SVC(C=2.0 if True else 1.0)\n",
    "model = SVC(class=1)\n",
    "model = SVC(C=None)\n",
    "model = SVC(C=True)\n",
    "model = SVC(C=1_000, gamma=0x10)\n",
    "model = SVC(C=0001)\n",
    "model = SVC(C = 2.0 ,  gamma = 'scale' )\n",
    "model = SVC(\n    C=2.0,\n    # a comment (inside)\n    gamma=0.1,\n)\n",
    "model = SVC(C=2.0)  # SVR(C=3)\n",
    "model = SVC(C=2.0\u3000)\n",
    "model = SVC(C=2.0)\u2028x = 1\n",
    "model = SVC(C=2.0)\r\nx = 1\r\n",
    "model = SVC(C=2.0) \\\n    if True else None\n",
    "model = SVC(C=r'2')\n",
    "model = SVC(C='''2''')\n",
    "model = SVC(C=f'{2}')\n",
    "s = '''\n# not a comment\n'''\nmodel = SVC(C=2.0)\n",
    "model = SVC(C=2.0, __debug__=1)\n",
    "model = SVC(C=9" + "9" * 40 + ")\n",
    "model = SVC(C=9" + "9" * 5000 + ")\n",
    "model = DecisionTreeClassifier(max_depth=0, min_samples_leaf=-3)\n",
    "model = make_pipeline(SplineTransformer(n_knots=7), FunctionTransformer(np.sign), SVR())\n",
    "model = make_pipeline(SelectPercentile(f_classif, percentile=20), Ridge(alpha=0.5))\n",
    "model = make_pipeline(SimpleImputer(strategy='mean', add_indicator=1), SVR(C=2))\n",
    "def build():\n    return SVC(C=3.0)\nmodel = build()\n",
    "async def f():\n    await SVC(C=1.0)\n",
    "import numpy as np\nimport sklearn\n",
    "x = 1\ny = x is 1\nmodel = SVC(C=2.0)\n",
    "model = SVC(C=2.0)\nbreak\n",
    "model = xSVC(C=1.0)\nm = _SVR(C=1)\nm = 1SVC(C=2)\nm = \u00e9SVC(C=4)\n",
    "model = sklearn.svm.SVC(C=3.0)\nRidge (alpha=2.0)\n",
    "model = SVC(C=2.0)\n" + "for i in range(2):\n" * 25 + "    " * 25 + "pass\n",
]
_NUMBER = re.compile(r"(?<=[=(, ])(\d+\.?\d*(?:e-?\d+)?)(?=[,)\n])")
_ODD_VALUES = (
    "7", "0.37", "1e-3", "-2", "1_000", "0x10", "None", "'auto'", "\"balanced\"", "rng",
    "np.inf", "2.", ".5", "1E2", "True", "(3)", "[1]", "3j", "-0.0", "007", "0",
)  # fmt: skip
_NUMERIC_ONLY = ("n_knots=", "percentile=", "max_depth=", "l2_regularization=")
"""Keywords whose non-numeric values make the world models raise (not a prediction)."""
_NUMERIC_VALUES = tuple(v for v in _ODD_VALUES if v not in ("'auto'", '"balanced"', "[1]", "3j"))
_COMMENTS = (
    "# a note", "#", "   # indented note", "# SVR(C=3)", "# signed", "# it's", '# say "hi"',
    '# """', "# coding: latin-1", "# café", "# )", "# (", "\t# tab",
)  # fmt: skip


def contexts() -> list[tuple[str, str]]:
    """(description, kind) of the pool suite's six generated tasks and a text that names no
    task."""
    tasks = [headroom_task(t) for t in POOL_TASKS]
    return [(t.description, t.kind) for t in tasks] + [("a task this package never made", "")]


def _mutate(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    choice = rng.randrange(16)
    if choice == 0:  # a comment or blank line anywhere
        for _ in range(rng.randint(1, 3)):
            lines.insert(rng.randrange(len(lines) + 1), rng.choice((*_COMMENTS, "", "   ")))
        return "\n".join(lines)
    if choice == 1:  # a hyperparameter written otherwise
        numbers = list(_NUMBER.finditer(text))
        if numbers:
            m = rng.choice(numbers)
            numeric = text[: m.start()].endswith(_NUMERIC_ONLY)
            value = rng.choice(_NUMERIC_VALUES if numeric else _ODD_VALUES)
            return text[: m.start()] + value + text[m.end() :]
        return text + "x = 1\n"
    if choice == 2:  # a statement appended
        return text + rng.choice(("_extra = 1\n", "print('done')\n", "x = (\n", "return 1\n"))
    if choice == 3:  # spaces and newlines inside the model's call
        return re.sub(r", ", rng.choice((",\n    ", " , ", ",", ",\t")), text, count=3)
    if choice == 4:  # trailing spaces
        return "\n".join(line + " " * rng.randint(0, 2) for line in lines)
    if choice == 5:  # other line endings
        return text.replace("\n", rng.choice(("\r\n", "\n\n", "\u2028", "\x0c\n")))
    if choice == 6:  # a closing parenthesis dropped or doubled
        i = text.rfind(")")
        return text[:i] + rng.choice(("", "))")) + text[i + 1 :]
    if choice == 7:  # quotes changed
        return text.replace('"', "'")
    if choice == 8:  # the model call alone
        m = re.search(r"\b[A-Z]\w+(Classifier|Regressor|Regression|Ridge|SVC|SVR)\([^\n]*\)", text)
        return (m.group(0) if m else text) + "\n"
    if choice == 9:  # a keyword repeated
        return re.sub(r"\((\w+)=", r"(\1=1, \1=", text, count=1)
    if choice == 10:  # a docstring line broken over two lines
        return text.replace('"""Solution ', '"""Solution\n# inside\n', 1)
    if choice == 11:  # non-ASCII in a comment or a string
        return text.replace("# score", "# scoré", 1).replace('"id,prediction"', '"id,prédiction"')
    if choice == 12:  # a line continuation
        return text.replace("model.fit(", "model.fit( \\\n    ", 1)
    if choice == 13:  # an indented block around everything
        return "if True:\n" + "\n".join("    " + line for line in lines)
    if choice == 14:  # a keyword argument with a computed value
        return re.sub(r"=(\d[\d.]*)([,)])", r"=float(\1)\2", text, count=1)
    return text.replace("StandardScaler()", "StandardScaler(with_mean=False)", 1)


def program_sample(n: int = 600, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` (context, program) pairs: a third the grammar's renderings for the task's own
    kind, a third mutated ones, the rest the fixed oddities, the first suite's programs and
    renderings for another kind; then every comment variant of a few of them."""
    rng = random.Random(seed)
    tasks = contexts()
    points = sample_programs(n, seed + 1)
    v1 = all_programs()
    out_contexts: list[str] = []
    out_programs: list[str] = []
    for i in range(n):
        description, kind = tasks[i % len(tasks)]
        own = kind or KINDS[i % 3]
        text = points[i].render(own)
        part = i % 6
        if part in (1, 2):
            text = _mutate(text, rng)
        elif part == 3:
            text = _mutate(_mutate(text, rng), rng)
        elif part == 4:
            text = FIXED[(i // 6) % len(FIXED)]
        elif part == 5:
            other = KINDS[(KINDS.index(own) + 1 + i % 2) % 3]
            text = rng.choice((points[i].render(other), render_program(v1[i % len(v1)], own)))
        out_contexts.append(description)
        out_programs.append(text)
    for i in range(0, n, 25):  # comment variants after the original: the cache's regime
        for comment in _COMMENTS:
            out_contexts.append(out_contexts[i])
            out_programs.append(out_programs[i] + comment + "\n")
    return out_contexts, out_programs
