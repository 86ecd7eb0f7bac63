"""From what a sandboxed process did to an :class:`ExecResult`: one classification for every
backend, so that a status means the same thing wherever the job ran.

Example:
    >>> from wmrl_env.sandboxes.job import Job
    >>> outcome = ProcessOutcome(exit_code=1, seconds=0.2, timeout_s=5)
    >>> outcome.stderr.write(b"Traceback ...\\nZeroDivisionError: division by zero\\n")
    >>> result = outcome.to_result(Job("1/0", job_id="a"))
    >>> result.status.value, result.message
    ('crashed', 'exit status 1: ZeroDivisionError: division by zero')
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.sandboxes.job import Job
from wmrl_env.sandboxes.limits import SandboxLimits
from wmrl_env.sandboxes.scoring import apply_scorer

__all__ = ["ProcessOutcome", "TailBuffer"]

# The last stderr line of a Python program that ran out of address space (RLIMIT_AS) or of
# memory: MemoryError and its subclasses (numpy's _ArrayMemoryError), a failed mmap of a
# shared library while importing, a failed C++ allocation.
_MEMORY_ERROR = re.compile(
    r"(^|[.\s])\w*MemoryError\b|Cannot allocate memory|failed to map segment|std::bad_alloc"
)


class TailBuffer:
    """Keeps the last ``cap`` bytes written to it and counts all of them.

    Example:
        >>> tail = TailBuffer(cap=4)
        >>> tail.write(b"abcdef")
        >>> tail.text(), tail.total, tail.truncated
        ('cdef', 6, True)
    """

    def __init__(self, cap: int = 1 << 20) -> None:
        self.cap = cap
        self.total = 0
        self._data = bytearray()

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._data += chunk[-self.cap :]
        if len(self._data) > 2 * self.cap:
            del self._data[: -self.cap]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        return bytes(self._data[-self.cap :]).decode("utf-8", errors="replace")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class ProcessOutcome:
    """What a backend observed about one run, before classification.

    Attributes:
        exit_code: the program's exit status, ``None`` when it did not exit by itself.
        signal: the signal that ended it, if any.
        timed_out: the wall clock ran out and the backend killed the process tree.
        cancelled: the executor was closed while the job ran.
        oom_killed: the backend saw the kernel's OOM killer end it (Docker's cgroup).
        outputs: collected output files; ``output_problems`` says what could not be collected.
    """

    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    oom_killed: bool = False
    seconds: float = 0.0
    timeout_s: float = 0.0
    memory_mb: int | None = None
    stdout: TailBuffer = field(default_factory=TailBuffer)
    stderr: TailBuffer = field(default_factory=TailBuffer)
    outputs: dict[str, bytes] = field(default_factory=dict)
    output_problems: list[str] = field(default_factory=list)

    @classmethod
    def under(cls, limits: SandboxLimits, timeout_s: float) -> ProcessOutcome:
        """An empty outcome of a job that runs under ``limits`` with wall clock ``timeout_s``
        (its output buffers cut at ``limits.max_output_bytes``)."""
        return cls(
            timeout_s=timeout_s,
            memory_mb=limits.memory_mb,
            stdout=TailBuffer(limits.max_output_bytes),
            stderr=TailBuffer(limits.max_output_bytes),
        )

    def status(self) -> tuple[ExecStatus, str]:
        """The status and the reason, most specific cause first."""
        memory = f" (limit {self.memory_mb} MB)" if self.memory_mb else ""
        last = _last_line(self.stderr.text())
        if self.cancelled:
            return ExecStatus.ERROR, "the executor was closed while the job ran; it was killed"
        if self.timed_out:
            return (
                ExecStatus.TIMEOUT,
                f"wall-clock limit of {self.timeout_s:g} s exceeded; the process tree was killed",
            )
        if self.signal == signal.SIGXCPU:
            return ExecStatus.TIMEOUT, "CPU-time limit exceeded (SIGXCPU)"
        if self.oom_killed:
            return ExecStatus.OUT_OF_MEMORY, f"killed by the kernel's OOM killer{memory}"
        if self.exit_code != 0 and _MEMORY_ERROR.search(last):
            return ExecStatus.OUT_OF_MEMORY, f"ran out of memory{memory}: {last}"
        if self.signal is not None:
            return ExecStatus.CRASHED, f"killed by {_signal_name(self.signal)}"
        if self.exit_code != 0:
            detail = f": {last}" if last else ""
            return ExecStatus.CRASHED, f"exit status {self.exit_code}{detail}"
        if self.output_problems:
            return ExecStatus.INVALID_OUTPUT, "; ".join(self.output_problems)
        return ExecStatus.OK, ""

    def to_result(self, job: Job, metadata: Mapping[str, Any] | None = None) -> ExecResult:
        """The scored result of ``job``; ``metadata`` holds the backend's facts."""
        status, message = self.status()
        facts: dict[str, Any] = dict(metadata or {})
        for name, tail in (("stdout", self.stdout), ("stderr", self.stderr)):
            facts[f"{name}_bytes"] = tail.total
            facts[f"{name}_truncated"] = tail.truncated
        if job.tags:
            facts["tags"] = dict(job.tags)
        result = ExecResult(
            job_id=job.job_id,
            status=status,
            wall_seconds=self.seconds,
            exec_seconds=self.seconds,
            stdout=self.stdout.text(),
            stderr=self.stderr.text(),
            outputs=dict(self.outputs),
            message=message,
            metadata=facts,
        )
        return apply_scorer(result, job.scorer)
