"""Real executions of the policy's programs: replayed when the table holds them, else live.

* :class:`ReplayOrLiveExecutor` answers a job from a :class:`~wmrl_env.sandboxes.ReplayExecutor`
  when the table holds its (task, program hash) -- a real recorded run, charged its recorded
  seconds -- and sends every other job to a live sandbox (the warm local sandbox, say).
* :class:`ScoreProgramFailures` turns a program's own failure (crash, timeout, out of memory,
  invalid output) into an ``ok`` result scored ``failure_score``
  (:func:`~wmrl_env.executors.outcome_score`), so that a reward function that leaves failed
  executions out still scores them as failures; the original status stays in
  ``metadata["program_status"]``. Infrastructure failures pass through unchanged.

Example:
    >>> from wmrl_env.sandboxes import Job, ReplayExecutor, ReplayRecord
    >>> from wmrl_env.utils.hashing import artifact_hash
    >>> replay = ReplayExecutor([ReplayRecord("t", artifact_hash("fit()"), "crashed", 0, 1.5)])
    >>> with ScoreProgramFailures(ReplayOrLiveExecutor(replay, live=replay)) as executor:
    ...     (result,) = executor.run([Job("fit()", tags={"task_id": "t"})])
    >>> result.status.value, result.score, result.exec_seconds, result.metadata["program_status"]
    ('ok', 0.0, 1.5, 'crashed')
"""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import Future
from typing import Any

from wmrl_env.executors.base import BaseExecutor, ExecResult, ExecStatus, Executor, outcome_score
from wmrl_env.sandboxes.job import Job
from wmrl_env.sandboxes.replay import ReplayExecutor

__all__ = ["ReplayOrLiveExecutor", "ScoreProgramFailures"]


class ReplayOrLiveExecutor(BaseExecutor[Job]):
    """Replays the jobs ``replay`` holds and runs the others on ``live``.

    ``metadata["replay"]`` says which way each result came. Closing closes both.
    """

    def __init__(self, replay: ReplayExecutor, live: Executor) -> None:
        self.replay = replay
        self.live = live
        self.n_replayed = 0
        self.n_live = 0

    def _submit(self, jobs: list[Job]) -> list[Future[ExecResult]]:
        held = [not isinstance(self.replay.lookup(job), str) for job in jobs]
        replayed = iter(self.replay.submit([j for j, h in zip(jobs, held, strict=True) if h]))
        live = iter(self.live.submit([j for j, h in zip(jobs, held, strict=True) if not h]))
        self.n_replayed += sum(held)
        self.n_live += len(jobs) - sum(held)
        return [next(replayed) if h else next(live) for h in held]

    def _close(self) -> None:
        self.live.close()
        self.replay.close()


class ScoreProgramFailures(BaseExecutor[Any]):
    """Wraps an executor so that program failures come back ``ok`` with ``failure_score``."""

    def __init__(self, inner: Executor, failure_score: float = 0.0) -> None:
        self.inner = inner
        self.failure_score = float(failure_score)

    def _submit(self, jobs: list[Any]) -> list[Future[ExecResult]]:
        return [self._mapped(future) for future in self.inner.submit(jobs)]

    def _mapped(self, future: Future[ExecResult]) -> Future[ExecResult]:
        out: Future[ExecResult] = Future()

        def done(finished: Future[ExecResult]) -> None:
            result = finished.result()
            if result.status.is_infrastructure_failure or (
                result.ok and math.isfinite(result.score)
            ):
                out.set_result(result)
                return
            metadata = {**result.metadata, "program_status": result.status.value}
            out.set_result(
                dataclasses.replace(
                    result,
                    status=ExecStatus.OK,
                    score=outcome_score(result, self.failure_score),
                    metadata=metadata,
                )
            )

        future.add_done_callback(done)
        return out

    def _close(self) -> None:
        self.inner.close()
