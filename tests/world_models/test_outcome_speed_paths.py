"""The default world model's fast paths change no prediction: programs the compiler need not
check are not compiled, and code keys are shared between the featurizer and the pre-gate;
the prediction contract is bit-identical to the always-compiling path on the speed
benchmark's three regimes (new code, comment variants, repeats), invalid programs included.
"""

from __future__ import annotations

import numpy as np

from wmrl_env.envs.ml_tasks import get_task, task_ids
from wmrl_env.envs.ml_tasks.programs import all_programs, render_program
from wmrl_env.world_models import load_default_ml_world_model
from wmrl_env.world_models.programs import program_features

GROUP_SIZE = 8
INVALID = ["return 1", "f(a=1, a=2)\n", "def f(a, a):\n    pass\n", "break", "def f(:"]


def _regimes(batch: int) -> dict[str, list[str]]:
    """As benchmarks/bench_outcome_speed.py builds them (two rounds of ``batch``)."""
    specs = all_programs()

    def tagged(tag: str) -> list[str]:
        return [
            render_program(specs[i % len(specs)], "binary") + tag.format(r=r, i=i)
            for r in range(2)
            for i in range(batch)
        ]

    new_code = tagged("_round_{r}_item_{i} = {i}\n")
    for j, program in enumerate(INVALID):
        new_code[3 + 17 * j] = program
    return {
        "new_code": new_code,
        "new_comment": tagged("# round {r} item {i}\n"),
        "cached": new_code,
    }


def _outcomes(model, contexts, texts):
    o = model.predict_outcomes(contexts, texts)
    return o.status_probs, o.score, o.std, o.expected_reward, o.known, o.error_probs


def test_fast_paths_predict_bit_identically(monkeypatch) -> None:
    batch = 96
    tasks = [get_task(t).description for t in task_ids("heldout")]
    contexts = [tasks[(i // GROUP_SIZE) % len(tasks)] for i in range(2 * batch)]
    regimes = _regimes(batch)
    assert sum(t in INVALID for t in regimes["new_code"]) == len(INVALID)

    program_features.code_key.cache_clear()
    fast = load_default_ml_world_model()
    got = {name: _outcomes(fast, contexts, texts) for name, texts in regimes.items()}

    program_features.code_key.cache_clear()
    monkeypatch.setattr(
        "wmrl_env.utils.python_source.needs_compiler_check", lambda tree, program: True
    )
    monkeypatch.setattr(program_features, "code_key", program_features.code_key.__wrapped__)
    slow = load_default_ml_world_model()
    for name, texts in regimes.items():
        for a, b in zip(got[name], _outcomes(slow, contexts, texts), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
    known = got["new_code"][4]
    assert known.sum() == len(INVALID)
