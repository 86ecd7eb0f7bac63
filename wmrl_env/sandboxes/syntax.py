"""Programs whose failure is known without running them.

A program that the interpreter cannot compile fails in any sandbox (``SyntaxError``: a
crash, a program failure). :func:`does_not_parse` tells so in microseconds, so a reward can
score it at its failure score without executing it (``WorldModelReward(known_failure=...)``).
The check (:func:`~wmrl_env.utils.python_source.parses`, the package's one test of valid
Python) compiles with this interpreter's grammar: a sandbox running an older Python may
reject newer syntax that passes here (then the program is scored like any other).

Example:
    >>> does_not_parse("print(1)"), does_not_parse("def f(:\\n  pass")
    (False, True)
"""

from __future__ import annotations

from typing import Any

from wmrl_env.utils.python_source import parses

__all__ = ["does_not_parse"]


def does_not_parse(program: Any) -> bool:
    """True when ``program`` (Python source) does not compile; anything but a ``str`` is
    not judged (False)."""
    return isinstance(program, str) and not parses(program)
