"""What the code policy writes, measured: does it parse, run, score; how varied; how good.

:func:`sample_programs` draws programs for task prompts (sampled, or greedy);
:func:`execute_programs` runs them for real on their tasks (any executor: the table replay
for the grid's programs and the warm sandbox for the rest, see
:class:`~wmrl_env.code_policy.executors.ReplayOrLiveExecutor`) and returns one
:class:`ProgramOutcome` each; :func:`summarise` gives the shares that parse, run and score,
distinct programs per 100 samples, the share outside the 72-program grid and the mean score
(a failure scores ``failure_score``).

Example:
    >>> outcomes = [ProgramOutcome("t", "x = 1", True, "ok", 0.5, True),
    ...             ProgramOutcome("t", "x = (", False, "crashed", 0.0, False)]
    >>> summary = summarise(outcomes)
    >>> summary["parse"], summary["scores"], summary["mean_score"], summary["distinct_per_100"]
    (0.5, 0.5, 0.25, 100.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecStatus, Executor, outcome_score
from wmrl_env.utils.imports import require
from wmrl_env.utils.python_source import parses

__all__ = [
    "ProgramOutcome",
    "execute_programs",
    "grid_hashes",
    "parses",
    "sample_programs",
    "summarise",
]

_RAN = (ExecStatus.OK, ExecStatus.INVALID_OUTPUT)  # exited normally (output may be unusable)


@dataclass(frozen=True)
class ProgramOutcome:
    """One program's real execution on one task.

    ``status`` is the execution's own status (before any failure mapping), ``score`` the
    reward it earns (failures: the failure score), ``in_grid`` whether the program is one of
    the 72 grid programs of its task (its hash is in the execution table).
    """

    task_id: str
    program: str
    parses: bool
    status: str
    score: float
    in_grid: bool


def grid_hashes(task_id: str) -> set[str]:
    """Hashes of the grid programs the execution table holds for ``task_id``."""
    from wmrl_env.envs.ml_tasks import load_table

    return {row.program_hash for row in load_table().for_task(task_id)}


def sample_programs(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    num_samples: int,
    *,
    greedy: bool = False,
    temperature: float = 1.0,
    max_new_tokens: int = 128,
    seed: int = 0,
    batch_size: int = 64,
) -> list[list[str]]:
    """``num_samples`` programs per prompt (greedy: the same one repeated), as text.

    Sampling is seeded by ``seed`` on a forked torch random state.
    """
    torch = require("torch", "sample_programs")
    rows = [p for p in prompts for _ in range(num_samples)]
    texts: list[str] = []
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for start in range(0, len(rows), batch_size):
            batch = tokenizer(
                rows[start : start + batch_size],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            )
            out = model.generate(
                **batch,
                do_sample=not greedy,
                temperature=temperature if not greedy else None,
                top_k=0 if not greedy else None,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            completions = out[:, batch["input_ids"].shape[1] :]
            texts += tokenizer.batch_decode(completions, skip_special_tokens=True)
    return [texts[i * num_samples : (i + 1) * num_samples] for i in range(len(prompts))]


def execute_programs(
    task_ids: Sequence[str],
    programs: Sequence[str],
    executor: Executor,
    failure_score: float = 0.0,
) -> list[ProgramOutcome]:
    """Run ``programs[i]`` on task ``task_ids[i]`` (one batch); unparseable programs run too
    (they crash, as in training)."""
    from wmrl_env.envs.ml_tasks import get_task

    if len(task_ids) != len(programs):
        raise ValueError(f"{len(task_ids)} task ids for {len(programs)} programs")
    jobs = [get_task(t).make_job(p) for t, p in zip(task_ids, programs, strict=True)]
    results = executor.run(jobs)
    grids = {t: grid_hashes(t) for t in set(task_ids)}
    return [
        ProgramOutcome(
            task_id=t,
            program=p,
            parses=parses(p),
            status=str(r.metadata.get("program_status", r.status.value)),
            score=outcome_score(r, failure_score),
            in_grid=job.tags["program_hash"] in grids[t],
        )
        for t, p, r, job in zip(task_ids, programs, results, jobs, strict=True)
    ]


def summarise(outcomes: Sequence[ProgramOutcome]) -> dict[str, float]:
    """Shares that parse / run / score, distinct programs per 100 (per task, averaged), the
    share outside the grid, and the mean score (NaN for infrastructure failures left out)."""
    if not outcomes:
        raise ValueError("no outcomes to summarise")
    status = [o.status for o in outcomes]
    by_task: dict[str, list[str]] = {}
    for o in outcomes:
        by_task.setdefault(o.task_id, []).append(o.program)
    distinct = [100.0 * len(set(p)) / len(p) for p in by_task.values()]
    return {
        "samples": float(len(outcomes)),
        "parse": float(np.mean([o.parses for o in outcomes])),
        "runs": float(np.mean([s in {x.value for x in _RAN} for s in status])),
        "scores": float(np.mean([s == ExecStatus.OK.value for s in status])),
        "outside_grid": float(np.mean([not o.in_grid for o in outcomes])),
        "distinct_per_100": float(np.mean(distinct)),
        "mean_score": float(np.nanmean([o.score for o in outcomes])),
    }
