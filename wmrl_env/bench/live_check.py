"""Execute a few final programs live in the sandbox and compare with the execution table.

Training in replay answers every real execution from the committed table; this check shows
that the table is what the sandbox does: each (held-out task, program) pair runs for real and
its score is set beside the table's.

Example (needs the local sandbox, about 3 s a program):
    >>> checks = live_check({"wine": "standardize-linear-mid"})  # doctest: +SKIP
    >>> checks[0].matches  # doctest: +SKIP
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LiveCheck:
    """One program executed live beside its table row."""

    task_id: str
    program_id: str
    status: str
    live_score: float
    table_score: float
    live_seconds: float

    @property
    def matches(self) -> bool:
        """Same status class and, when both succeeded, the same score within 1e-9."""
        if math.isnan(self.live_score) or math.isnan(self.table_score):
            return math.isnan(self.live_score) and math.isnan(self.table_score)
        return abs(self.live_score - self.table_score) <= 1e-9

    def to_json(self) -> dict:
        data = asdict(self)
        data["matches"] = self.matches
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in data.items()}


def live_check(programs: Mapping[str, str], workers: int = 2) -> list[LiveCheck]:
    """Run ``programs`` (task id -> program id) in the local sandbox, concurrently."""
    from wmrl_env.envs.ml_tasks import MLTaskEnv, ProgramSpec, load_table
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox

    if not programs:
        return []
    table = load_table()
    sandbox = default_sandbox(max_workers=workers, suite_programs=True)
    env = MLTaskEnv(tasks=list(programs), executor=sandbox, action_mode="structured")
    try:
        jobs = [env.make_job(ProgramSpec.from_id(p), task_id=t) for t, p in programs.items()]
        results = sandbox.run(jobs)
    finally:
        env.close()
        sandbox.close()
    checks = []
    for (task, program), result in zip(programs.items(), results, strict=True):
        row = table.lookup(task, program)
        checks.append(
            LiveCheck(
                task_id=task,
                program_id=program,
                status=result.status.value,
                live_score=float(result.score) if result.ok else math.nan,
                table_score=float(row.score) if row.status == "ok" else math.nan,
                live_seconds=float(result.exec_seconds),
            )
        )
    return checks


def markdown(checks: list[LiveCheck]) -> str:
    """The checks as a Markdown table."""
    lines = [
        "| held-out task | final greedy program | live status | live score | table score "
        "| live s | same |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in checks:
        lines.append(
            f"| {c.task_id} | {c.program_id} | {c.status} | {c.live_score:.4f} "
            f"| {c.table_score:.4f} | {c.live_seconds:.1f} | {'yes' if c.matches else 'NO'} |"
        )
    return "\n".join(lines)
