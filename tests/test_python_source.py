"""One answer to "is this valid Python" across the package: the known-failure check before
execution, the world model's program features and the code policy's parse rate agree,
including on programs the grammar accepts but the compiler refuses."""

from __future__ import annotations

import ast

import pytest

from wmrl_env.code_policy import parses as policy_parses
from wmrl_env.sandboxes import does_not_parse
from wmrl_env.utils.python_source import needs_compiler_check, parses
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


COMPILE_ONLY = [  # one per kind of error the grammar lets through and the compiler refuses
    "async def foo():\n    yield from 123\n",
    "def g(): {(yield x): x for x in ()}",
    "def g(): ((yield x) for x in ())",
    "[(yield x) for x in ()]",
    "continue\n",
    "\nasync for x in y:\n    a\n",
    "async with a:\n    pass\n",
    "await x",
    "yield",
    "break",
    "for x in y:\n    pass\nelse:\n    break\n",
    "async def foo():\n    yield\n    return 123\n",
    "try:\n    raise ValueError\nexcept* Exception as e:\n    break\n",
    'match ...:\n    case "a" | a:\n        pass\n',
    "def f():\n    global x\n    x: int\n",
    "def f():\n    nonlocal x\n    x: int\n",
    "[i for i in (i := range(5))]",
    "[i := 0 for i in range(5)]",
    "class Foo():\n    [(42, 1 + (j := i)) for i in range(5)]\n",
    "[[i async for i in a] for a in elts]\n",
    "match ...:\n    case Class(a=_, a=_):\n        pass\n",
    "*a",
    "a, *b, *c = d",
    "__debug__ = 1",
    "del __debug__\n",
    "f(__debug__=1)",
    "x.__debug__ = 1",
    "[i for i in range(5) if (j := 0) for j in range(5)]",
    "try:\n  pass\nexcept:\n  pass\nexcept ValueError:\n  pass",
    "lambda a, a: 0",
    "def f(a, *, a): pass",
    "x = 1\nfrom __future__ import division",
    "from __future__ import doesnt_exist",
    "from __future__ import braces",
    "def f():\n  from _ import *",
    "f(a=23, a=234)\n",
    "f(p, k1=50, *(1, 2), k1=100)",
    "class A(x=1, x=2): pass",
    'match ...:\n    case {"a": _, "a": _}:\n        pass\n',
    'match ...:\n    case {f"": _}:\n        pass\n',
    "match ...:\n    case a, a:\n        pass\n",
    "[*b, *c] = range(10)\n",
    "match ...:\n    case a, *b, c, *d, e:\n        pass\n",
    "def f():\n    x = 1\n    global x\n",
    "def f():\n    x = 1\n    def g():\n        x = 2\n        nonlocal x\n",
    "def f():\n  global x\n  nonlocal x",
    "def f(x): global x",
    "def f(x):\n  nonlocal x",
    "def f():\n    print(x)\n    global x\n",
    'match ...:\n    case a | "a":\n        pass\n',
    "def f():\n    nonlocal x\n",
    "nonlocal x",
    'match ...:\n    case f"":\n        pass\n',
    "*a = range(10)\n",
    "".join(f"{' ' * i}while {i}:\n" for i in range(21)) + " " * 21 + "pass\n",
    "with " + ", ".join(f"a{i}" for i in range(21)) + ":\n    pass\n",
    "for a in b:\n"
    + "".join(f"{' ' * i} for x{i} in y:\n" for i in range(1, 21))
    + " " * 22
    + "pass\n",
    "match ...:\n    case _ | _:\n        pass\n",
]


@pytest.mark.parametrize("program", COMPILE_ONLY)
def test_what_only_the_compiler_refuses_is_refused(program: str) -> None:
    """The grammar accepts each, the compiler does not: the check that skips compiling plain
    programs must send every one of them to the compiler."""
    tree = ast.parse(program)
    with pytest.raises(SyntaxError):
        compile(tree, "<program>", "exec", dont_inherit=True)
    assert needs_compiler_check(tree, program)
    assert not parses(program)


def test_plain_ml_programs_are_not_compiled_and_parse() -> None:
    """The suite's programs (and an LLM's usual variations on them) are read without
    compiling; the answer is the compiler's."""
    from wmrl_env.envs.ml_tasks.programs import all_programs, render_program

    variants = ["", "\nwith open('log.txt', 'w') as f:\n    f.write(str(len(test_ids)))\n"]
    variants += ["\nfor i in range(3):\n    print({k: v for k, v in zip('ab', [i, -i])})\n"]
    programs = [
        render_program(s, kind) for s in all_programs() for kind in ("binary", "regression")
    ]
    programs = [p + v for p in programs for v in variants]
    for program in programs:
        tree = ast.parse(program)
        assert not needs_compiler_check(tree, program), program
        compile(tree, "<program>", "exec", dont_inherit=True)
        assert parses(program)
    with_def = programs[0] + "\ndef main():\n    return 1\n"
    assert needs_compiler_check(ast.parse(with_def), with_def) and parses(with_def)
