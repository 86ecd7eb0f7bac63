"""What the code LM reads and clones as a reviser: prompts with the last turn, and revision pairs.

A reviser's prompt is the task statement, the last program and the report its run printed
(:func:`~wmrl_env.envs.ml_tasks.turns.render_report`, a real or a simulated turn alike); on the
first turn it is the task statement alone (:func:`~wmrl_env.code_policy.data.task_prompt`). The
target is the next program, or ``STOP``.

:func:`revision_pairs` mines behaviour-cloning pairs from the committed execution table (real
recorded runs): for every grid program of a task, its real report (replayed) and

* a failed run -> the scripted fix for its error
  (:func:`~wmrl_env.envs.ml_tasks.reviser.fix_for_error`), kept only when the fix runs;
* a run that scored -> a one-choice neighbour that runs, drawn uniformly, or ``STOP`` when no
  neighbour scores higher (the run is a local optimum);
* the first turn -> a grid program drawn uniformly.

Example:
    >>> prompt = revision_prompt("wine", None, None)
    >>> prompt.splitlines()[-1]
    'Program:'
    >>> pairs = revision_pairs(["wine"], max_turns=3, seed=0)
    >>> kinds = {target == "STOP" or "Solution" in target.splitlines()[0] for _, target in pairs}
    >>> len(pairs) > 72, kinds
    (True, {True})
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from wmrl_env.code_policy.data import task_prompt

__all__ = ["REVISED_HEADER", "revision_pairs", "revision_prompt", "task_of_observation"]

REVISED_HEADER = "Revised program:\n"
_REPORT_HEAD = re.compile(r"Task (\S+)[:,]")


def revision_prompt(task_id: str, last_program: str | None, last_report: str | None) -> str:
    """The prompt for the next program: the task, then (after a turn) the last program and the
    report it got. Ends in ``Program:`` (first turn) or ``Revised program:``."""
    if last_program is None or last_report is None:
        return task_prompt(task_id)
    head = task_prompt(task_id).removesuffix("Program:\n")
    return f"{head}Last program:\n{last_program.rstrip()}\nReport:\n{last_report}\n{REVISED_HEADER}"


def task_of_observation(observation: str) -> str:
    """The task id a task description or a turn report names."""
    match = _REPORT_HEAD.match(observation)
    if match is None:
        raise ValueError(f"not a task description or a turn report: {observation[:80]!r}")
    return match.group(1)


def revision_pairs(
    task_ids: Sequence[str],
    max_turns: int = 3,
    seed: int = 0,
    first_per_task: int = 8,
    ok_per_task: int = 0,
) -> list[tuple[str, str]]:
    """(prompt, target) pairs mined from the execution table's real runs of ``task_ids``
    (module docstring): ``first_per_task`` first-turn pairs per task, one pair for each
    failed run, and one for each of ``ok_per_task`` runs that scored, drawn uniformly
    (0: all of them)."""
    from wmrl_env.envs.ml_tasks import STOP, get_task, load_table, render_program
    from wmrl_env.envs.ml_tasks.reviser import fix_for_error, neighbours
    from wmrl_env.envs.ml_tasks.turns import render_report, report_from_result
    from wmrl_env.sandboxes.job import Job

    if max_turns < 2:
        raise ValueError(f"a revision needs max_turns >= 2, got {max_turns}")
    rng = np.random.default_rng(seed)
    table = load_table()
    replay = table.replay_executor()
    pairs: list[tuple[str, str]] = []
    for task_id in task_ids:
        kind = get_task(task_id).kind
        rows = {row.spec: row for row in table.for_task(task_id)}
        if not rows:
            raise ValueError(f"the execution table holds no runs of task {task_id!r}")
        grid = sorted(rows, key=lambda s: s.id)
        specs = grid
        scored = [s for s in grid if rows[s].status == "ok"]
        if ok_per_task and len(scored) > ok_per_task:
            keep = {scored[k] for k in rng.choice(len(scored), ok_per_task, replace=False)}
            specs = [s for s in grid if rows[s].status != "ok" or s in keep]
        for k in rng.choice(len(grid), size=first_per_task):
            pairs.append((task_prompt(task_id), render_program(grid[k], kind)))
        jobs = [Job(render_program(s, kind), tags={"task_id": task_id}) for s in specs]
        for spec, result in zip(specs, replay.run(jobs), strict=True):
            turn = int(rng.integers(1, max_turns))
            report = report_from_result(result, task_id, turn, max_turns, None)
            if report.status != "ok":
                fix = fix_for_error(spec, report)
                if fix not in rows or rows[fix].status != "ok":
                    continue
                target = render_program(fix, kind)
            else:
                running = [n for n in neighbours(spec) if n in rows and rows[n].status == "ok"]
                if not any(rows[n].score > rows[spec].score for n in running):
                    target = STOP
                else:
                    target = render_program(running[int(rng.integers(len(running)))], kind)
            program = render_program(spec, kind)
            pairs.append((revision_prompt(task_id, program, render_report(report)), target))
    return pairs
