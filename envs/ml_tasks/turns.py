"""What one turn of a multi-turn ML episode reports: the real run's status, error, score, seconds.

:class:`TurnReport` is the structured report of one execution; :func:`render_report` turns it
into the observation text the agent reads next turn, so a report that a world model predicts
(status, error class, score) renders in exactly the same format as a real one.
:func:`report_from_result` names a crash's exception with the package's one reading of
tracebacks (:func:`wmrl_env.world_models.outcomes.error_class`, the one the world models learn
from), so a real and a predicted report name classes alike.

Example:
    >>> report = TurnReport(task_id="wine", turn=1, max_turns=3, status="crashed",
    ...                     error_class="ValueError",
    ...                     traceback_tail="ValueError: Input X contains NaN.",
    ...                     score=None, seconds=0.8, best_score=None)
    >>> print(render_report(report))
    Task wine, turn 1 of 3
    status: crashed
    error: ValueError
    traceback (last lines):
    ValueError: Input X contains NaN.
    validation score: none
    seconds: 0.80
    best validation score so far: none
    >>> parse_report(render_report(report)) == report
    True
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from wmrl_env.executors.base import ExecResult
from wmrl_env.world_models.outcomes import error_class

__all__ = [
    "TRACEBACK_LINES",
    "TurnReport",
    "parse_report",
    "render_report",
    "report_from_result",
]

TRACEBACK_LINES = 6
# the class a failure without an exception reports
_STATUS_CLASSES = {
    "timeout": "Timeout",
    "invalid_output": "InvalidOutput",
    "out_of_memory": "MemoryError",
}


@dataclass(frozen=True)
class TurnReport:
    """One execution as the agent sees it.

    Attributes:
        task_id: the episode's task.
        turn, max_turns: this turn's number (from 1) and the episode's limit.
        status: the executor's status (``ok``, ``crashed``, ``timeout``, ``invalid_output``,
            ``out_of_memory``, ``error``).
        error_class: the exception's class name for a failed run (``None`` when it ran).
        traceback_tail: the last lines of the traceback or the failure message.
        score: the normalised validation score of a run that produced one, else ``None``.
        seconds: the run's execution seconds.
        best_score: the best score of the episode so far, this run included (``None``: none).
    """

    task_id: str
    turn: int
    max_turns: int
    status: str
    error_class: str | None
    traceback_tail: str
    score: float | None
    seconds: float
    best_score: float | None


def render_report(report: TurnReport) -> str:
    """The observation text of a turn (the same format for real and predicted reports)."""
    lines = [f"Task {report.task_id}, turn {report.turn} of {report.max_turns}"]
    lines.append(f"status: {report.status}")
    if report.status != "ok":
        lines.append(f"error: {report.error_class or 'unknown'}")
        lines.append("traceback (last lines):")
        lines.append(report.traceback_tail or "(none)")
    lines += [
        f"validation score: {_number(report.score)}",
        f"seconds: {report.seconds:.2f}",
        f"best validation score so far: {_number(report.best_score)}",
    ]
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def _parse_number(text: str) -> float | None:
    return None if text == "none" else float(text)


def parse_report(text: str) -> TurnReport | None:
    """The report an observation renders (``None`` for any other text, e.g. a task description).

    A policy that reads observations through this reads a real and a simulated turn alike.
    """
    lines = text.splitlines()
    head = re.fullmatch(r"Task (\S+), turn (\d+) of (\d+)", lines[0]) if lines else None
    if head is None or len(lines) < 5 or not lines[1].startswith("status: "):
        return None
    status = lines[1].removeprefix("status: ")
    error, tail = None, ""
    if status != "ok":
        error = lines[2].removeprefix("error: ")
        error = None if error == "unknown" else error
        tail = "\n".join(lines[4:-3])
        tail = "" if tail == "(none)" else tail
    return TurnReport(
        task_id=head.group(1),
        turn=int(head.group(2)),
        max_turns=int(head.group(3)),
        status=status,
        error_class=error,
        traceback_tail=tail,
        score=_parse_number(lines[-3].removeprefix("validation score: ")),
        seconds=float(lines[-2].removeprefix("seconds: ")),
        best_score=_parse_number(lines[-1].removeprefix("best validation score so far: ")),
    )


def report_from_result(
    result: ExecResult, task_id: str, turn: int, max_turns: int, best_before: float | None
) -> TurnReport:
    """The report of a real execution result (``best_before``: the episode's best so far)."""
    status = result.status.value
    failed = not result.ok or not math.isfinite(result.score)
    tail_source = result.stderr.strip() or result.message
    tail = "\n".join(tail_source.splitlines()[-TRACEBACK_LINES:]) if failed else ""
    score = None if failed else float(result.score)
    scores = [v for v in (best_before, score) if v is not None]
    return TurnReport(
        task_id=task_id,
        turn=turn,
        max_turns=max_turns,
        status=status,
        error_class=(
            _STATUS_CLASSES.get(status) or error_class(result.message, result.stderr)
            if failed
            else None
        ),
        traceback_tail=tail,
        score=score,
        seconds=float(result.exec_seconds),
        best_score=max(scores) if scores else None,
    )
