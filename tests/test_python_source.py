"""One answer to "is this valid Python" across the package: the known-failure check before
execution, the world model's program features and the code policy's parse rate agree,
including on programs the grammar accepts but the compiler refuses."""

from __future__ import annotations

import pytest

from wmrl_env.code_policy import parses as policy_parses
from wmrl_env.sandboxes import does_not_parse
from wmrl_env.utils.python_source import parses
from wmrl_env.world_models.programs.program_features import program_features

VALID = ["print(1)", "x = [i for i in range(3)]\n", "def f(a):\n    return a\n", ""]
INVALID = [
    "def f(:\n  pass",  # grammar
    "return 1",  # the compiler: outside a function
    "break",
    "def f(a, a):\n    pass",
    "nonlocal x",
    "print('a\x00b')\x00",  # null bytes
]


@pytest.mark.parametrize("program", VALID + INVALID)
def test_every_check_gives_the_same_answer(program: str) -> None:
    valid = program in VALID
    assert parses(program) is valid
    assert does_not_parse(program) is not valid
    assert policy_parses(program) is valid
    assert (program_features(program) is not None) is valid


def test_a_compiler_error_is_a_crash_in_the_interpreter() -> None:
    """What the one predicate refuses, the interpreter refuses too."""
    for program in INVALID:
        with pytest.raises((SyntaxError, ValueError)):
            compile(program, "<program>", "exec")
