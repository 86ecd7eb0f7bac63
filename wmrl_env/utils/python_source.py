"""The one test of whether a program is valid Python, shared by everything that asks: the
known-failure check before execution (:func:`~wmrl_env.sandboxes.does_not_parse`), the
program features a world model reads, and the code policy's parse rate.

Valid means what the interpreter accepts before running anything: the grammar *and* the
compiler's checks (``return`` or ``await`` outside a function, ``break`` outside a loop, a
repeated argument name, ``nonlocal`` at module level), which :func:`ast.parse` alone lets
through although every sandbox then fails with a ``SyntaxError``.

Example:
    >>> parses("print(1)"), parses("def f(:\\n  pass"), parses("return 1")
    (True, False, False)
    >>> type(parse_program("x = 1")).__name__, parse_program("break") is None
    ('Module', True)
"""

from __future__ import annotations

import ast

__all__ = ["parse_program", "parses"]


def parse_program(program: str) -> ast.Module | None:
    """The syntax tree of ``program`` when this interpreter would run it, else ``None``."""
    try:
        tree = ast.parse(program)
        compile(tree, "<program>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return None
    return tree


def parses(program: str) -> bool:
    """Whether ``program`` is Python this interpreter would run (see the module docstring)."""
    return parse_program(program) is not None
