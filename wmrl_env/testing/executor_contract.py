"""The shared conformance tests for every :class:`~wmrl_env.executors.base.Executor`."""

from __future__ import annotations

import math
from concurrent.futures import Future
from typing import Any

import pytest

from wmrl_env.executors.base import ExecResult, ExecStatus, ExecutorClosedError


class ExecutorContract:
    """Mixin: subclass with ``Test`` prefix and implement the hooks below."""

    #: statuses a failing job from :meth:`make_failing_job` may end with
    failing_statuses: tuple[ExecStatus, ...] = (
        ExecStatus.CRASHED,
        ExecStatus.ERROR,
        ExecStatus.INVALID_OUTPUT,
    )

    def make_executor(self) -> Any:
        raise NotImplementedError

    def make_ok_job(self, i: int) -> Any:
        """A job that succeeds with score :meth:`expected_score` ``(i)``; unique id per ``i``."""
        raise NotImplementedError

    def expected_score(self, i: int) -> float:
        raise NotImplementedError

    def make_failing_job(self) -> Any:
        """A job that fails (crash, bad output) without taking the executor down."""
        raise NotImplementedError

    @pytest.fixture
    def executor(self):
        executor = self.make_executor()
        yield executor
        executor.close()

    def test_run_returns_one_result_per_job_in_order(self, executor) -> None:
        jobs = [self.make_ok_job(i) for i in range(3)]
        results = executor.run(jobs)
        assert len(results) == 3
        for i, (job, result) in enumerate(zip(jobs, results, strict=True)):
            assert isinstance(result, ExecResult)
            assert result.job_id == job.job_id
            assert result.status is ExecStatus.OK, result.message or result.stderr
            assert result.score == pytest.approx(self.expected_score(i))
            assert result.wall_seconds >= 0 and result.exec_seconds >= 0

    def test_submit_returns_futures(self, executor) -> None:
        jobs = [self.make_ok_job(i) for i in range(2)]
        futures = executor.submit(jobs)
        assert len(futures) == 2 and all(isinstance(f, Future) for f in futures)
        results = [f.result(timeout=300) for f in futures]
        assert [r.job_id for r in results] == [j.job_id for j in jobs]

    def test_failure_is_a_result_and_spares_the_batch(self, executor) -> None:
        jobs = [self.make_ok_job(0), self.make_failing_job(), self.make_ok_job(1)]
        results = executor.run(jobs)
        assert results[0].ok and results[2].ok
        assert results[1].status in self.failing_statuses, results[1]
        assert math.isnan(results[1].score)
        assert results[1].message, "a failed result must say why"
        assert results[2].score == pytest.approx(self.expected_score(1))

    def test_empty_batch(self, executor) -> None:
        assert executor.run([]) == []

    def test_duplicate_job_ids_rejected(self, executor) -> None:
        job = self.make_ok_job(0)
        with pytest.raises(ValueError, match="unique"):
            executor.submit([job, job])

    def test_closed_executor_refuses_work_and_close_is_idempotent(self) -> None:
        executor = self.make_executor()
        executor.close()
        executor.close()
        with pytest.raises(ExecutorClosedError):
            executor.run([self.make_ok_job(0)])

    def test_context_manager_closes(self) -> None:
        with self.make_executor() as executor:
            assert executor.run([self.make_ok_job(0)])[0].ok
        with pytest.raises(ExecutorClosedError):
            executor.submit([self.make_ok_job(1)])
