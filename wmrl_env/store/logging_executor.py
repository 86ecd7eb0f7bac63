"""Wrap any executor so that every result is committed to an :class:`ExecutionLog` before
anyone sees it.

Each job's future from the wrapper resolves only after its row is durable, so a caller that
has a result knows it is logged; results finish and are logged one by one, so killing the
process mid-batch loses none of the executions that already finished. Job tags fill the
log's columns: ``task_id``, ``run_id`` (else the wrapper's ``run_id``), ``step`` and
``wm_score`` (the world model's score for this artifact when it was chosen as an anchor);
other tags and the result's metadata go to the row's JSON ``metadata``.

Example:
    >>> import tempfile, os
    >>> from wmrl_env.sandboxes.replay import ReplayExecutor, ReplayRecord
    >>> from wmrl_env.utils.hashing import artifact_hash
    >>> replay = ReplayExecutor([ReplayRecord("t", artifact_hash("x = 1"), "ok", 0.9, 1.5)])
    >>> path = os.path.join(tempfile.mkdtemp(), "log.sqlite")
    >>> with LoggingExecutor(replay, path, run_id="demo") as executor:
    ...     result = executor.run([Job("x = 1", tags={"task_id": "t", "step": 0})])[0]
    ...     row = executor.log.rows()[0]
    >>> result.score, row.score, row.run_id, row.exec_seconds
    (0.9, 0.9, 'demo', 1.5)
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future
from functools import partial

from wmrl_env.executors.base import BaseExecutor, ExecResult, ExecStatus, Executor
from wmrl_env.sandboxes.job import Job

from .sqlite_log import ExecutionLog

__all__ = ["LoggingExecutor"]

logger = logging.getLogger(__name__)


class LoggingExecutor(BaseExecutor[Job]):
    """An executor that logs every result of the executor it wraps.

    Args:
        executor: the executor that really runs the jobs.
        log: an :class:`ExecutionLog`, or a path to open one at (then owned and closed with
            this wrapper).
        run_id: stored with every row whose job has no ``run_id`` tag.
        close_executor: close the wrapped executor when this wrapper closes.

    A row that cannot be written (disk full, database locked past its timeout) does not lose
    the result: the error is logged, the result still reaches the caller, and the pair is kept
    in :attr:`unrecorded` so it can be written later.
    """

    def __init__(
        self,
        executor: Executor[Job],
        log: ExecutionLog | str | os.PathLike[str],
        *,
        run_id: str | None = None,
        close_executor: bool = True,
    ) -> None:
        if not callable(getattr(executor, "submit", None)):
            raise TypeError(f"executor must implement submit(), got {type(executor).__name__}")
        self.executor = executor
        self._owns_log = not isinstance(log, ExecutionLog)
        self.log = ExecutionLog(log) if self._owns_log else log
        self.run_id = run_id
        self.close_executor = close_executor
        self.unrecorded: list[tuple[Job, ExecResult]] = []

    def _submit(self, jobs: list[Job]) -> list[Future[ExecResult]]:
        inner = self.executor.submit(jobs)
        if len(inner) != len(jobs):
            raise RuntimeError(
                f"{type(self.executor).__name__} returned {len(inner)} futures for {len(jobs)} jobs"
            )
        outer: list[Future[ExecResult]] = []
        for job, future in zip(jobs, inner, strict=True):
            logged: Future[ExecResult] = Future()
            logged.set_running_or_notify_cancel()
            future.add_done_callback(partial(self._commit, job, logged))
            outer.append(logged)
        return outer

    def _commit(self, job: Job, logged: Future[ExecResult], future: Future[ExecResult]) -> None:
        try:
            result = future.result()
        except BaseException as exc:  # an executor broke its contract: still a logged result
            result = ExecResult(
                job_id=job.job_id,
                status=ExecStatus.ERROR,
                message=f"{type(self.executor).__name__} raised {exc!r}",
            )
        try:
            self.log.record_job(job, result, run_id=self.run_id)
        except Exception:
            logger.exception("could not log the execution of job %s; kept in memory", job.job_id)
            self.unrecorded.append((job, result))
        logged.set_result(result)

    def _close(self) -> None:
        try:
            if self.close_executor:
                self.executor.close()
        finally:
            if self._owns_log:
                self.log.close()
