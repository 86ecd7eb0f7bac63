"""Resource limits shared by the sandboxes: one validated record, one place for the defaults.

Example:
    >>> limits = SandboxLimits(timeout_s=5, memory_mb=512)
    >>> limits.memory_bytes // 2**20, limits.timeout_for(None), limits.timeout_for(2.5)
    (512, 5.0, 2.5)
    >>> SandboxLimits(timeout_s=0)
    Traceback (most recent call last):
    ...
    ValueError: timeout_s must be positive, got 0
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["SandboxLimits"]


@dataclass(frozen=True)
class SandboxLimits:
    """What one job may use. Every sandbox enforces each field or says in the result's
    ``metadata`` which it could not enforce.

    Attributes:
        timeout_s: wall-clock seconds before the whole process tree is killed (``timeout``);
            a job's own :attr:`~wmrl_env.sandboxes.job.Job.timeout_s` overrides it.
        memory_mb: memory per job. The local sandbox limits address space (``RLIMIT_AS``:
            importing numpy + pandas + scikit-learn takes ~350 MB of it), Docker limits the
            container's resident memory (cgroup); exceeding it is ``out_of_memory``.
        max_processes: processes and threads per job (fork bombs stop here).
        max_file_mb: the largest file a job may write.
        max_open_files: open file descriptors per process.
        max_output_bytes: stdout and stderr are each cut to their last this-many bytes.
        max_collect_bytes: the largest output file collected into ``ExecResult.outputs``.
    """

    timeout_s: float = 10.0
    memory_mb: int = 1024
    max_processes: int = 64
    max_file_mb: int = 256
    max_open_files: int = 256
    max_output_bytes: int = 1 << 20
    max_collect_bytes: int = 16 << 20

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")
        for name in (
            "memory_mb",
            "max_processes",
            "max_file_mb",
            "max_open_files",
            "max_output_bytes",
            "max_collect_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb << 20

    def timeout_for(self, job_timeout_s: float | None) -> float:
        """The wall-clock limit of a job: its own ``timeout_s`` when set, else this one."""
        return float(self.timeout_s if job_timeout_s is None else job_timeout_s)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
