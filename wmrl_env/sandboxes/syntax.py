"""Programs whose failure is known without running them.

A program that the interpreter cannot compile fails in any sandbox (``SyntaxError``: a
crash, a program failure). :func:`does_not_parse` tells so in microseconds, so a reward can
score it at its failure score without executing it (``WorldModelReward(known_failure=...)``).
The check compiles with this interpreter's grammar: a sandbox running an older Python may
reject newer syntax that passes here (then the program is scored like any other).

Example:
    >>> does_not_parse("print(1)"), does_not_parse("def f(:\\n  pass")
    (False, True)
"""

from __future__ import annotations

from typing import Any

__all__ = ["does_not_parse"]


def does_not_parse(program: Any) -> bool:
    """True when ``program`` (Python source) does not compile; anything but a ``str`` is
    not judged (False)."""
    if not isinstance(program, str):
        return False
    try:
        compile(program, "<program>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return True
    return False
