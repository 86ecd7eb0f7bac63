"""What a program sandbox runs: a :class:`Job` (a Python program, its inputs, the files to
collect) and the :data:`Scorer` that turns the collected files into a score on the host.

Example:
    >>> job = Job(program="print('hi')", output_files=["score.json"])
    >>> job.output_files, len(job.job_id)
    (('score.json',), 32)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wmrl_env.executors.base import new_job_id

__all__ = ["InvalidOutputError", "Job", "Scorer"]


class InvalidOutputError(ValueError):
    """Raised by a scorer when a job's outputs cannot be scored; becomes ``invalid_output``."""


Scorer = Callable[[Mapping[str, bytes]], float]
"""Scores a job's collected output files (name -> content) on the host, outside the sandbox.

Raise :class:`InvalidOutputError` with a clear message when the outputs cannot be scored."""


@dataclass(frozen=True)
class Job:
    """A Python program to run in a sandbox.

    Attributes:
        program: Python source, run as ``python3 main.py`` in a fresh, writable work directory.
        inputs: read-only inputs, name inside the sandbox's ``inputs/`` directory -> host path
            (a file or a directory). Hidden answers never go here: scoring happens outside.
        output_files: names (relative to the work directory) collected after the run into
            :attr:`ExecResult.outputs`.
        scorer: turns the collected outputs into a score on the host; ``None`` means the job
            has no score (``ExecResult.score`` stays NaN).
        timeout_s: per-job wall-clock limit overriding the executor's default.
        job_id: unique within a batch; echoed in the result.
        tags: free metadata (task id, run id, step) carried into the result and the log.

    Example:
        >>> job = Job(program="print('hi')")
        >>> job.output_files
        ()
    """

    program: str
    inputs: Mapping[str, str | os.PathLike[str]] = field(default_factory=dict)
    output_files: tuple[str, ...] = ()
    scorer: Scorer | None = None
    timeout_s: float | None = None
    job_id: str = field(default_factory=new_job_id)
    tags: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.program, str):
            raise TypeError(f"Job.program must be str, got {type(self.program).__name__}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"Job.timeout_s must be positive, got {self.timeout_s}")
        object.__setattr__(self, "output_files", tuple(self.output_files))
        for name in self.output_files:
            if os.path.isabs(name) or ".." in name.split("/"):
                raise ValueError(f"output file {name!r} must be a relative path inside the job")
