"""The README's usage example runs as written, with a policy that samples the program space."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, "the README should hold exactly one Python example"
    return blocks[0]


def sampling_policy():
    """Task descriptions -> programs: a random choice of the structured space per task."""
    from wmrl_env.envs.ml_tasks import (
        ProgramSpec,
        get_task,
        program_space,
        render_program,
        task_ids,
    )

    kind_of = {get_task(t).description: get_task(t).kind for t in task_ids("all")}
    rng = np.random.default_rng(0)
    space = program_space()

    def my_policy(descriptions):
        return tuple(
            render_program(ProgramSpec.from_action(rng.integers(space.nvec)), kind_of[d])
            for d in descriptions
        )

    return my_policy


@pytest.mark.slow
@pytest.mark.transformers
def test_readme_example_runs_and_executes_one_group_for_real(capsys) -> None:
    namespace = {"my_policy": sampling_policy()}
    exec(compile(readme_example(), str(README), "exec"), namespace)
    info, envs = namespace["info"], namespace["envs"]
    try:
        assert info["is_anchor"].sum() == 8  # one group of 8 in 10 groups (10 %)
        anchors = info["is_anchor"]
        statuses = list(
            zip(info["exec_status"][anchors], info["exec_message"][anchors], strict=True)
        )
        assert all(status == "ok" for status, _ in statuses), statuses
        assert np.isfinite(info["real_score"][anchors]).all()
        assert np.isnan(info["real_score"][~anchors]).all()
        assert np.isfinite(info["advantage"]).all() and np.isfinite(namespace["rewards"]).all()
        assert capsys.readouterr().out.startswith("8 ")
    finally:
        envs.close()
