"""Worker threads for the sandboxes: one future per job, every outcome a result, closing kills.

A sandbox gives :class:`JobPool` a function that runs one job to an :class:`ExecResult`. The
pool runs it on ``max_workers`` threads, resolves each job's future with its result (never an
exception: a backend bug becomes an ``error`` result that says so), and on :meth:`close`
kills the jobs that run and answers the queued ones with ``error`` results.

Example:
    >>> from wmrl_env.executors.base import ExecResult
    >>> from wmrl_env.sandboxes.job import Job
    >>> pool = JobPool(lambda job, cancel: ExecResult(job.job_id, "ok", score=1.0), 2, "demo")
    >>> [future.result().score for future in pool.submit([Job("pass"), Job("pass")])]
    [1.0, 1.0]
    >>> pool.close()
"""

from __future__ import annotations

import itertools
import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

from wmrl_env.executors.base import BaseExecutor, ExecResult, ExecStatus
from wmrl_env.sandboxes.job import Job
from wmrl_env.sandboxes.workdir import check_jobs

__all__ = ["Cancellation", "JobPool", "PooledSandbox"]

logger = logging.getLogger(__name__)


class Cancellation:
    """A cancelled flag and the kill callbacks of the jobs that run now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._kills: dict[int, Callable[[], None]] = {}
        self._keys = itertools.count()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @contextmanager
    def kill_on_cancel(self, kill: Callable[[], None]) -> Iterator[None]:
        """Within the block, :meth:`cancel` calls ``kill`` (at once if already cancelled)."""
        with self._lock:
            key = None if self._cancelled else next(self._keys)
            if key is not None:
                self._kills[key] = kill
        if key is None:
            kill()
        try:
            yield
        finally:
            with self._lock:
                self._kills.pop(key, None)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            kills = list(self._kills.values())
            self._kills.clear()
        for kill in kills:
            try:
                kill()
            except Exception:  # one job's failed kill must not spare the others
                logger.exception("killing a job on close failed")


RunOne = Callable[[Job, Cancellation], ExecResult]


class JobPool:
    """Runs ``run_one(job, cancellation)`` for each job on ``max_workers`` threads."""

    def __init__(self, run_one: RunOne, max_workers: int, name: str) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self._run_one = run_one
        self.cancellation = Cancellation()
        self._threads = ThreadPoolExecutor(max_workers, thread_name_prefix=name)

    def submit(self, jobs: Sequence[Job]) -> list[Future[ExecResult]]:
        futures: list[Future[ExecResult]] = []
        for job in jobs:
            future: Future[ExecResult] = Future()
            future.set_running_or_notify_cancel()  # the caller cannot cancel a paid-for job
            self._threads.submit(self._resolve, job, future)
            futures.append(future)
        return futures

    def _resolve(self, job: Job, future: Future[ExecResult]) -> None:
        if self.cancellation.cancelled:
            result = ExecResult(
                job.job_id, ExecStatus.ERROR, message="the executor was closed before the job ran"
            )
        else:
            try:
                result = self._run_one(job, self.cancellation)
            except Exception as error:
                logger.exception("job %s failed inside the executor", job.job_id)
                result = ExecResult(
                    job.job_id, ExecStatus.ERROR, message=f"the executor failed: {error!r}"
                )
        future.set_result(result)

    def close(self) -> None:
        """Kill the running jobs, answer the queued ones, and wait for the threads."""
        self.cancellation.cancel()
        self._threads.shutdown(wait=True)


class PooledSandbox(BaseExecutor[Job]):
    """A sandbox whose jobs run on a :class:`JobPool`: checks each job at submit, then queues
    it; closing runs the finalizer the subclass registered (pool, temporary files, ...)."""

    _pool: JobPool
    _finalizer: weakref.finalize

    def _submit(self, jobs: list[Job]) -> list[Future[ExecResult]]:
        check_jobs(jobs, type(self).__name__)
        return self._pool.submit(jobs)

    def _close(self) -> None:
        self._finalizer()
