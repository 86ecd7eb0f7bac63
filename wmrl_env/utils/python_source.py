"""The one test of whether a program is valid Python, shared by everything that asks: the
known-failure check before execution (:func:`~wmrl_env.sandboxes.does_not_parse`), the
program features a world model reads, and the code policy's parse rate.

Valid means what the interpreter accepts before running anything: the grammar *and* the
compiler's checks (``return`` or ``await`` outside a function, ``break`` outside a loop, a
repeated argument name, ``nonlocal`` at module level), which :func:`ast.parse` alone lets
through although every sandbox then fails with a ``SyntaxError``.

Who needs the tree (:func:`parse_program`) gets it from :func:`ast.parse`, and compiling the
tree again is the costly half; only some constructs can fail it (``return``, ``break``,
function definitions, ``global``, starred targets, a repeated keyword argument,
``__debug__`` ...). A program built only of statements and expressions that cannot
(assignments, calls with distinct keywords, imports, ``if``/``for``/``while``/``with``,
comprehensions, literals, operators: what an ML script is mostly made of) is not compiled:
:func:`needs_compiler_check` decides, by reading the tree once. Who needs only the answer
(:func:`parses`) compiles the text in one step, which costs less than parsing it to a tree.
A compiler *warning* is not an error for :func:`parses` (the interpreter runs such a
program), whatever the warning filters.

Example:
    >>> parses("print(1)"), parses("def f(:\\n  pass"), parses("return 1")
    (True, False, False)
    >>> type(parse_program("x = 1")).__name__, parse_program("break") is None
    ('Module', True)
"""

from __future__ import annotations

import ast
import warnings

__all__ = ["needs_compiler_check", "parse_program", "parses"]

_PLAIN = frozenset(
    [
        ast.Module, ast.Expr, ast.Assign, ast.AugAssign, ast.Import, ast.ImportFrom, ast.alias,
        ast.If, ast.For, ast.While, ast.With, ast.withitem, ast.Pass, ast.Raise, ast.Assert,
        ast.Delete, ast.Call, ast.keyword, ast.Attribute, ast.Name, ast.Constant, ast.BinOp,
        ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Subscript, ast.Slice, ast.List, ast.Tuple,
        ast.Dict, ast.Set, ast.IfExp, ast.JoinedStr, ast.FormattedValue, ast.ListComp,
        ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension,
    ]
)  # fmt: skip
"""Node types the compiler accepts wherever the parser put them (checked against CPython's
own syntax-error tests: tests/test_python_source.py)."""
_SCALARS = ("ctx", "op", "ops", "name", "asname", "module", "level", "arg", "attr", "is_async")
_FIELDS = {
    kind: tuple(f for f in kind._fields if f not in (*_SCALARS, "conversion", "type_comment"))
    for kind in _PLAIN
}  # the fields that hold nodes (operator and context singletons are never refused)
_LEAVES = (ast.Name, ast.Constant, type(None))  # nothing below them (None: a Dict's ``**x`` key)
_MAX_BLOCKS = 10
"""Loops and ``with`` items beyond which the compiler's limit on nested blocks (20) is left
to the compiler."""


def needs_compiler_check(tree: ast.Module, program: str) -> bool:
    """Whether compiling ``tree`` (parsed from ``program``) could raise a ``SyntaxError``:
    some node is not of a plain kind (:data:`_PLAIN`), a call repeats a keyword, an import
    is from ``__future__``, a comprehension is async, loops and ``with`` items add up to
    :data:`_MAX_BLOCKS`, or the text names ``__debug__``. False means it compiles."""
    if "__debug__" in program:
        return True
    blocks, stack = 0, [tree]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in _LEAVES:
            continue
        fields = _FIELDS.get(kind)
        if fields is None:
            return True
        if kind is ast.Call:
            if len(node.keywords) > 1:
                named = [k.arg for k in node.keywords if k.arg is not None]
                if len(named) != len(set(named)):
                    return True
        elif kind is ast.For or kind is ast.While:
            blocks += 1
        elif kind is ast.With:
            blocks += len(node.items)
        elif (kind is ast.ImportFrom and node.module == "__future__") or (
            kind is ast.comprehension and node.is_async
        ):
            return True
        if blocks >= _MAX_BLOCKS:
            return True
        for name in fields:
            child = getattr(node, name)
            if type(child) is list:
                stack.extend(child)
            else:
                stack.append(child)
    return False


def parse_program(program: str) -> ast.Module | None:
    """The syntax tree of ``program`` when this interpreter would run it, else ``None``
    (compiled only when :func:`needs_compiler_check` says the compiler could refuse it)."""
    try:
        tree = ast.parse(program)
        if needs_compiler_check(tree, program):
            compile(tree, "<program>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return None
    return tree


def parses(program: str) -> bool:
    """Whether ``program`` is Python this interpreter would run (see the module docstring).

    Without a tree to keep, compiling the text in one step is the cheapest exact answer
    (cheaper than parsing it to a tree and reading the tree); its warnings are not shown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(program, "<program>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):  # ValueError: null bytes
            return False
    return True
