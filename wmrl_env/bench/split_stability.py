"""How much of a task's ranking of programs is its test split: the same tasks and programs,
executed live under a second train/test split, set beside the committed execution table.

The execution table scores every program on every held-out task under one seeded split
(:data:`~wmrl_env.envs.ml_tasks.tasks.SPLIT_SEED`); "oracle 1.000" is the best program *on
that split's test rows*. :func:`execute_split` runs the 72 programs of a sample of tasks again
under another ``split_seed`` (same data, same programs, other train/test rows), appending each
finished execution to a JSON-lines file at once, so an interrupted run resumes and loses
nothing. :func:`split_scores` normalises the second split's raw metrics exactly as the table
build does (trivial baseline of that split's test rows → 0, best program seen → 1, a failed
program 0) and :func:`stability` compares the two splits per task: the Spearman between the
two score vectors, whether the best program is the same, and what each split's best program
scores under the other split (``1 -`` that is how much of "oracle 1.000" is split noise).

Example:
    >>> import numpy as np
    >>> a = np.array([[0.0, 0.5, 1.0], [1.0, 0.2, 0.0]])
    >>> b = np.array([[0.1, 1.0, 0.9], [1.0, 0.0, 0.3]])
    >>> s = stability(a, b)
    >>> s.spearman.round(2).tolist(), s.top1_agreement.tolist()
    ([0.5, 0.5], [0.0, 1.0])
    >>> s.b_score_of_a_best.tolist(), s.a_score_of_b_best.tolist()
    ([0.9, 1.0], [0.5, 1.0])
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from wmrl_env.executors.base import ExecStatus, Executor
from wmrl_env.fusion.calibration import spearman
from wmrl_env.sandboxes.job import Job


@dataclass(frozen=True)
class SplitExecution:
    """One program run live on one task under the split ``split_seed``: its raw metric
    (NaN unless ``status == "ok"``) and measured seconds."""

    task_id: str
    program_id: str
    split_seed: int
    status: str
    raw_metric: float
    exec_seconds: float
    recorded_at: str

    def to_json(self) -> dict:
        data = asdict(self)
        data["raw_metric"] = None if math.isnan(self.raw_metric) else self.raw_metric
        return data

    @classmethod
    def from_json(cls, data: dict) -> SplitExecution:
        raw = data["raw_metric"]
        return cls(**{**data, "raw_metric": math.nan if raw is None else float(raw)})

    @property
    def is_result(self) -> bool:
        """Whether the program's outcome is known (an ``error`` is the executor's failure,
        never a result: it is run again on resume)."""
        return self.status != ExecStatus.ERROR.value


def read_executions(path: str | os.PathLike[str]) -> list[SplitExecution]:
    """The executions recorded in ``path`` (none when it does not exist).

    A last line without its newline is an execution cut off while being written: it is
    ignored with a warning (and run again). Any other unreadable line is an error.
    """
    path = Path(path)
    if not path.is_file():
        return []
    text = path.read_text()
    lines = text.split("\n")
    torn = lines.pop()  # "" when the file ends with a newline
    if torn:
        warnings.warn(
            f"{path}: ignoring a cut-off last line ({len(torn)} characters)", stacklevel=2
        )
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(SplitExecution.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}, line {number}: not an execution record ({error})") from None
    return out


def _drop_torn_tail(path: Path) -> None:
    """Cut the file back to its last complete line (after a crash mid-write)."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def latest_results(
    executions: Sequence[SplitExecution],
) -> dict[tuple[str, str, int], SplitExecution]:
    """(task, program, split seed) -> the latest execution that is a result."""
    latest = {}
    for execution in executions:
        if execution.is_result:
            latest[(execution.task_id, execution.program_id, execution.split_seed)] = execution
    return latest


def sample_tasks(task_ids: Sequence[str], count: int, seed: int = 0) -> list[str]:
    """``count`` tasks drawn without replacement; a larger ``count`` with the same seed
    extends a smaller one's sample (so a run can be grown and resumed).

    >>> sample_tasks(list("abcdef"), 3) == sample_tasks(list("abcdef"), 5)[:3]
    True
    """
    if not 0 < count <= len(task_ids):
        raise ValueError(f"count must be in 1..{len(task_ids)}, got {count}")
    order = np.random.default_rng(seed).permutation(len(task_ids))
    return [task_ids[i] for i in order[:count]]


def execute_split(
    task_ids: Sequence[str],
    split_seed: int,
    path: str | os.PathLike[str],
    executor: Executor[Job],
    programs: Sequence[str] | None = None,
    progress: Callable[[str], None] = print,
) -> list[SplitExecution]:
    """Run every (task, program) pair under ``split_seed`` that ``path`` has no result for
    yet, appending each execution to ``path`` as soon as it finishes (flushed and synced).

    Args:
        task_ids: tasks of the suite.
        split_seed: the train/test split to run them under.
        path: the JSON-lines file of executions (read to resume, appended to).
        executor: runs the jobs (the warm local sandbox, say); not closed here.
        programs: program ids (default: all 72 of the table's grid).

    Returns:
        every execution now recorded in ``path``.
    """
    from wmrl_env.envs.ml_tasks import all_programs, get_task, render_program
    from wmrl_env.envs.ml_tasks.programs import ProgramSpec

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _drop_torn_tail(path)
    program_ids = list(programs) if programs is not None else [p.id for p in all_programs()]
    done = latest_results(read_executions(path))
    jobs, pairs = [], []
    for task_id in task_ids:
        task = get_task(task_id, split_seed)
        for program_id in program_ids:
            if (task_id, program_id, split_seed) in done:
                continue
            text = render_program(ProgramSpec.from_id(program_id), task.kind)
            jobs.append(task.make_job(text, normalise=False, tags={"program_id": program_id}))
            pairs.append((task_id, program_id))
    total = len(task_ids) * len(program_ids)
    progress(f"{total - len(jobs)}/{total} executions kept from {path}; running {len(jobs)}")
    if not jobs:
        return read_executions(path)
    started = time.perf_counter()
    futures = executor.submit(jobs)
    index = {id(future): i for i, future in enumerate(futures)}
    with path.open("a") as log:
        for count, future in enumerate(as_completed(futures), start=1):
            task_id, program_id = pairs[index[id(future)]]
            result = future.result()
            execution = SplitExecution(
                task_id=task_id,
                program_id=program_id,
                split_seed=split_seed,
                status=result.status.value,
                raw_metric=float(result.score) if result.ok else math.nan,
                exec_seconds=round(float(result.exec_seconds), 4),
                recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            )
            log.write(json.dumps(execution.to_json()) + "\n")
            log.flush()
            os.fsync(log.fileno())
            if count % 24 == 0 or count == len(jobs):
                progress(
                    f"{count}/{len(jobs)} in {time.perf_counter() - started:.0f} s "
                    f"(last: {task_id} {program_id} {execution.status})"
                )
    return read_executions(path)


def split_scores(
    executions: Sequence[SplitExecution],
    task_ids: Sequence[str],
    split_seed: int,
    programs: Sequence[str] | None = None,
) -> np.ndarray:
    """``scores[t, p]``: program ``p``'s normalised score on task ``t`` under ``split_seed``,
    as the table build normalises (that split's trivial baseline → 0, the best raw metric
    of the task's programs → 1, clipped; a failed program 0, the reward the env gives it).
    Every pair must have a result."""
    from wmrl_env.envs.ml_tasks import all_programs, get_task
    from wmrl_env.envs.ml_tasks.scoring import METRICS, normalised_score

    program_ids = list(programs) if programs is not None else [p.id for p in all_programs()]
    latest = latest_results(executions)
    scores = np.zeros((len(task_ids), len(program_ids)))
    for t, task_id in enumerate(task_ids):
        rows = []
        for program_id in program_ids:
            execution = latest.get((task_id, program_id, split_seed))
            if execution is None:
                raise ValueError(f"no execution of {program_id} on {task_id} (split {split_seed})")
            rows.append(execution)
        task = get_task(task_id, split_seed)
        ok = [e.raw_metric for e in rows if e.status == "ok" and math.isfinite(e.raw_metric)]
        if not ok:
            continue
        best = (max if METRICS[task.metric].higher_is_better else min)(ok)
        for p, execution in enumerate(rows):
            if execution.status == "ok" and math.isfinite(execution.raw_metric):
                scores[t, p] = normalised_score(
                    execution.raw_metric, baseline=task.baseline, reference=best
                )
    return scores


def complete_tasks(
    executions: Sequence[SplitExecution],
    task_ids: Sequence[str],
    split_seed: int,
    programs: Sequence[str] | None = None,
) -> list[str]:
    """The tasks of ``task_ids`` with a result for every program under ``split_seed``."""
    from wmrl_env.envs.ml_tasks import all_programs

    program_ids = list(programs) if programs is not None else [p.id for p in all_programs()]
    latest = latest_results(executions)
    return [t for t in task_ids if all((t, p, split_seed) in latest for p in program_ids)]


@dataclass(frozen=True)
class SplitStability:
    """Per task (one entry each), the two splits compared.

    Attributes:
        spearman: rank correlation of the task's program scores, split A vs split B.
        top1_agreement: the chance that A's best program is one of B's best (ties at the
            top counted as a uniform pick).
        b_score_of_a_best: split B's score of A's best program (B's best scores 1).
        a_score_of_b_best: split A's score of B's best program (A's best scores 1).
        b_uniform: split B's mean score over the programs (the uniform policy there).
    """

    spearman: np.ndarray
    top1_agreement: np.ndarray
    b_score_of_a_best: np.ndarray
    a_score_of_b_best: np.ndarray
    b_uniform: np.ndarray

    def summary(self) -> dict[str, float]:
        """Means over the tasks, the standard error of each mean (over tasks), and the
        mean oracle regret ``1 -`` the other split's score of a split's best program."""
        regret = 1.0 - np.concatenate([self.b_score_of_a_best, self.a_score_of_b_best])
        out = {"tasks": float(len(self.spearman))}
        for name in ("spearman", "top1_agreement", "b_score_of_a_best", "a_score_of_b_best"):
            values = getattr(self, name)
            out[name] = float(np.nanmean(values))
            out[name + "_se"] = _standard_error(values)
        out["b_uniform"] = float(np.mean(self.b_uniform))
        out["regret_both_ways"] = float(np.mean(regret))
        out["spearman_min"] = float(np.nanmin(self.spearman))
        return out


def _standard_error(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else math.nan


def _best_mean(preferred: np.ndarray, scored: np.ndarray) -> float:
    """``scored``'s mean over the programs tied at ``preferred``'s maximum."""
    tied = preferred >= preferred.max() - 1e-12
    return float(scored[tied].mean())


def stability(scores_a: np.ndarray, scores_b: np.ndarray) -> SplitStability:
    """Compare two ``(tasks, programs)`` score matrices of the same tasks and programs."""
    scores_a, scores_b = np.asarray(scores_a, float), np.asarray(scores_b, float)
    if scores_a.shape != scores_b.shape or scores_a.ndim != 2:
        raise ValueError(f"score matrices of shapes {scores_a.shape} and {scores_b.shape}")
    if not (np.isfinite(scores_a).all() and np.isfinite(scores_b).all()):
        raise ValueError("score matrices must be finite (a failed program scores 0)")
    rows = list(zip(scores_a, scores_b, strict=True))
    return SplitStability(
        spearman=np.array([spearman(a, b) for a, b in rows]),
        top1_agreement=np.array(
            [_best_mean(a, (b >= b.max() - 1e-12).astype(float)) for a, b in rows]
        ),
        b_score_of_a_best=np.array([_best_mean(a, b) for a, b in rows]),
        a_score_of_b_best=np.array([_best_mean(b, a) for a, b in rows]),
        b_uniform=scores_b.mean(axis=1),
    )


def selection_on_other_split(
    scores_a: np.ndarray, scores_b: np.ndarray, budgets: Sequence[int], seeds: int, seed: int = 0
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Budget ``k`` -> per task, the mean over ``seeds`` random draws of ``k`` distinct
    programs of (split A's score, split B's score) of the draw's best program *by split A*:
    random search as the bench reads it (A, the split that scored the search) and what the
    program it found is worth on a fresh split (B). ``k`` = all programs is the oracle.

    >>> a, b = np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]])
    >>> read = selection_on_other_split(a, b, budgets=[2], seeds=1)
    >>> read[2][0].tolist(), read[2][1].tolist()
    ([1.0], [0.0])
    """
    rng = np.random.default_rng(seed)
    num_tasks, num_programs = scores_a.shape
    rows = np.arange(num_tasks)[:, None]
    totals = {k: (np.zeros(num_tasks), np.zeros(num_tasks)) for k in budgets}
    for _ in range(seeds):
        order = np.argsort(rng.uniform(size=(num_tasks, num_programs)), axis=1)
        for k in budgets:
            drawn = order[:, : min(k, num_programs)]
            pick = drawn[np.arange(num_tasks), scores_a[rows, drawn].argmax(axis=1)]
            totals[k][0][:] += scores_a[np.arange(num_tasks), pick]
            totals[k][1][:] += scores_b[np.arange(num_tasks), pick]
    return {k: (a / seeds, b / seeds) for k, (a, b) in totals.items()}


def markdown(task_ids: Sequence[str], result: SplitStability) -> str:
    """Per task and overall, as a Markdown table."""
    lines = [
        "| task | Spearman A vs B | same best | B's score of A's best | A's score of B's best "
        "| B uniform |",
        "|---|---|---|---|---|---|",
    ]
    for t, task_id in enumerate(task_ids):
        lines.append(
            f"| {task_id} | {result.spearman[t]:.3f} | {result.top1_agreement[t]:.2f} "
            f"| {result.b_score_of_a_best[t]:.3f} | {result.a_score_of_b_best[t]:.3f} "
            f"| {result.b_uniform[t]:.3f} |"
        )
    s = result.summary()
    lines.append(
        f"| **mean of {int(s['tasks'])}** | {s['spearman']:.3f} ± {s['spearman_se']:.3f} "
        f"| {s['top1_agreement']:.2f} ± {s['top1_agreement_se']:.2f} "
        f"| {s['b_score_of_a_best']:.3f} ± {s['b_score_of_a_best_se']:.3f} "
        f"| {s['a_score_of_b_best']:.3f} ± {s['a_score_of_b_best_se']:.3f} "
        f"| {s['b_uniform']:.3f} |"
    )
    return "\n".join(lines)
