"""The deterministic pre-gate: it answers only where the outcome is certain, and a real run
of each program it answers ends exactly as it says."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from wmrl_env.sandboxes import PreGate, does_not_parse

SUBMISSION = "predictions.csv"
ANSWERED = {
    "def f(:\n": "does_not_parse",
    "return 1\n": "does_not_parse",  # parses as a tree, does not compile
    "x = 1\0": "does_not_parse",
    "": "invalid_output",
    "# a note only\n\n": "invalid_output",
    '"""Docstring."""\nLIMIT = 3\ndef helper(a, b=2):\n    return open("predictions.csv")\n': (
        "invalid_output"
    ),
    "class Plan:\n    size = 4\n": "invalid_output",
}
NOT_ANSWERED = [
    "print(1)",
    "x = 1 / 0",  # calls nothing but raises: crashed, not invalid_output
    "y = undefined_name",
    "import os",
    "@staticmethod\ndef f():\n    pass\n",
    "def f(x=open('predictions.csv', 'w')):\n    pass\n",
    "def f(x: int):\n    pass\n",
    "class A(Base):\n    pass\n",
    "class A:\n    x = make()\n",
    "with ctx:\n    pass\n",
]


def test_answers_exactly_the_certain_cases() -> None:
    gate = PreGate(submission=SUBMISSION)
    programs = [*ANSWERED, *NOT_ANSWERED]
    answer = gate.answer(programs)
    assert answer.known.tolist() == [True] * len(ANSWERED) + [False] * len(NOT_ANSWERED)
    assert answer.status.tolist() == [*ANSWERED.values(), *[""] * len(NOT_ANSWERED)]
    assert all(answer.reasons[: len(ANSWERED)]) and not any(answer.reasons[len(ANSWERED) :])
    assert [gate(p) for p in programs] == answer.known.tolist()


def test_without_a_submission_only_compilation_is_judged() -> None:
    gate = PreGate()
    for program, status in ANSWERED.items():
        assert gate(program) == (status == "does_not_parse") == does_not_parse(program)


def test_non_text_is_not_judged_and_bad_settings_are_refused() -> None:
    answer = PreGate(submission=SUBMISSION).answer([None, 3, b"def f(:"])
    assert not answer.known.any() and answer.status.tolist() == ["", "", ""]
    assert PreGate().answer([]).known.shape == (0,)
    for bad in ("", 3):
        with pytest.raises(ValueError, match="submission"):
            PreGate(submission=bad)


def test_the_cache_returns_the_same_answers() -> None:
    gate = PreGate(submission=SUBMISSION, max_entries=2)
    programs = list(ANSWERED) * 2
    first, again = gate.answer(programs), gate.answer(programs)
    np.testing.assert_array_equal(first.status, again.status)
    assert len(gate._cache) == 2


@pytest.mark.slow
def test_a_real_run_of_each_answered_program_ends_as_the_gate_says() -> None:
    """Each answered program runs for real on an ML task: its status is the gate's (a
    program that does not compile crashes with a SyntaxError there) and its reward the
    failure score 0."""
    import wmrl_env.envs.ml_tasks  # noqa: F401  (registers the environments)

    gate = PreGate(submission=SUBMISSION)
    env = gym.make("wmrl/MLTask-v0", tasks="heldout")
    try:
        for program, status in ANSWERED.items():
            if "\0" in program:
                continue  # a null byte cannot reach a file-based sandbox as text
            env.reset(seed=0, options={"task_id": "wine"})
            _, reward, _, _, info = env.step(program)
            real = info["status"]
            if status == "does_not_parse":
                assert real == "crashed" and "SyntaxError" in info["message"], info
            else:
                assert real == status, info
            assert reward == 0.0 and gate(program)
    finally:
        env.close()


def test_programs_sharing_a_cache_key_are_judged_once(monkeypatch) -> None:
    """With ``cache_key=code_key`` a program that differs from one judged before only in
    comment or blank lines is not compiled again, and gets the same answer."""
    from wmrl_env.sandboxes import pregate
    from wmrl_env.world_models.programs.program_features import code_key

    compiled = []
    monkeypatch.setattr(pregate, "does_not_parse", lambda p: compiled.append(p) or "(:" in p)
    gate = PreGate(submission=SUBMISSION, cache_key=code_key)
    first = gate.answer(["def f(:\n", "x = 1\n", "print(1)\n"])
    variants = gate.answer(["# note\ndef f(:\n", "x = 1\n\n# end\n", "print(1)  \n"])
    np.testing.assert_array_equal(first.status, variants.status)
    assert len(compiled) == 3


def test_a_program_mentioning_import_is_not_judged_inert() -> None:
    gate = PreGate(submission=SUBMISSION)
    assert gate("x = 1\n") and not gate("x = 1  # no import here\n")


def test_a_parse_the_caller_already_made_is_not_made_again(monkeypatch) -> None:
    from wmrl_env.sandboxes import pregate

    def refuse(program):
        raise AssertionError("compiled again")

    monkeypatch.setattr(pregate, "does_not_parse", refuse)
    gate = PreGate(submission=SUBMISSION)
    answer = gate.answer(["def f(:", "x = 1", "print(1)"], parses=[False, True, True])
    assert answer.status.tolist() == ["does_not_parse", "invalid_output", ""]
    with pytest.raises(ValueError, match="parses has 1 entries"):
        gate.answer(["a", "b"], parses=[True])


def test_the_key_is_skipped_only_where_it_changes_no_answer() -> None:
    """With ``parses`` given, a gate keyed by code answers every program as a gate with no
    key that compiles each itself, whether the key was computed or skipped (a judgement
    that needs no parse skips it), in any order and repeated."""
    from wmrl_env.world_models.programs.program_features import code_key

    programs = [*ANSWERED, "print(1)\n", "import os\n", "import os\n# note\n", "x = (\n",
                "# note\nx = 1\n", "x = 1\n\n", "return 1  # import\n", "pass\n"]  # fmt: skip
    rng = np.random.default_rng(0)
    order = [programs[i] for i in rng.integers(0, len(programs), size=200)]
    for submission in (SUBMISSION, None):
        keyed = PreGate(submission=submission, cache_key=code_key)
        plain = PreGate(submission=submission)
        a = keyed.answer(order, parses=[not does_not_parse(p) for p in order])
        b = plain.answer(order)
        assert a.known.tolist() == b.known.tolist() and a.reasons == b.reasons
        assert a.status.tolist() == b.status.tolist()
