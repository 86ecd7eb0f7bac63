"""Worker processes for ``GymEnvExecutor(backend="process")``: each holds its own envs.

A :class:`ProcessWorker` owns one child process (holding an
:class:`~wmrl_env.env_executors.pool.EnvPool`; started, asked and stopped through
:class:`~wmrl_env.env_executors.child.ChildProcess`) and one thread that feeds it jobs one at
a time. A job that outlives its timeout gets the child killed; a child that dies (a
segfaulting simulator) is reported as ``error``, an infrastructure failure (the outcome of the
job is unknown, so it is missing data, never a score). Either way the next job starts a fresh
child, and only the envs of that child are lost.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue
import threading
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle

from wmrl_env.env_executors.child import ChildProcess, WorkerDiedError
from wmrl_env.env_executors.play import EnvDescription, EnvFactory, EnvJob
from wmrl_env.env_executors.pool import EnvPool
from wmrl_env.executors.base import ExecResult, ExecStatus

__all__ = ["ProcessWorker"]

_SEND_ERRORS = (pickle.PicklingError, TypeError, AttributeError)
STARTUP_TIMEOUT_S = 300.0


def _worker_main(conn: Connection, env_fn_bytes: bytes, max_envs: int | None) -> None:
    """Child process: say ``"ready"``, then serve ``("job", EnvJob)``, ``("describe", None)``
    and ``("end_episodes", None)`` until ``None``."""
    pool = EnvPool(cloudpickle.loads(env_fn_bytes), max_envs)
    conn.send("ready")
    try:
        while True:
            try:
                request = conn.recv()
            except EOFError:  # the parent went away
                break
            if request is None:
                break
            kind, payload = request
            if kind == "job":
                reply: Any = pool.run(payload)
            elif kind == "end_episodes":
                pool.end_episodes()
                reply = None
            else:
                try:
                    reply = pool.describe()
                except Exception as error:
                    reply = RuntimeError(f"describing the env failed: {error!r}")
            try:
                conn.send(reply)
            except _SEND_ERRORS as error:  # pickling failed before anything was sent
                conn.send(_unsendable(payload, error))
    finally:
        pool.close()
        conn.close()


def _unsendable(job: EnvJob | None, error: Exception) -> Any:
    message = f"the result could not be sent back from the worker: {error}"
    if job is None:
        return RuntimeError(message)
    return ExecResult(job_id=job.job_id, status=ExecStatus.ERROR, message=message)


def worker_context(start_method: str | None) -> Any:
    """The multiprocessing context for workers; default ``forkserver`` where there is one.

    A forkserver imports this module once, then forks each worker from itself: a worker (and
    a restart after a crash) starts in milliseconds instead of re-importing everything.
    """
    if start_method is None:
        available = multiprocessing.get_all_start_methods()
        start_method = "forkserver" if "forkserver" in available else "spawn"
    context = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        context.set_forkserver_preload([__name__])
    return context


class ProcessWorker:
    """One child process with its envs, fed by one thread; see the module docstring."""

    def __init__(
        self,
        env_fn: EnvFactory,
        start_method: str | None,
        name: str,
        max_envs: int | None = None,
    ) -> None:
        self._env_fn_bytes = cloudpickle.dumps(env_fn)
        self._max_envs = max_envs
        self._context = worker_context(start_method)
        self._name = name
        self._child: ChildProcess | None = None
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: EnvJob, timeout_s: float | None) -> Future[ExecResult]:
        future: Future[ExecResult] = Future()
        self._requests.put(("job", job, timeout_s, future))
        return future

    def describe(self) -> EnvDescription:
        future: Future[Any] = Future()
        self._requests.put(("describe", None, None, future))
        return future.result()

    def end_episodes(self) -> None:
        """Tell the child's pool that every slot's episode is over (after the queued jobs)."""
        future: Future[Any] = Future()
        self._requests.put(("end_episodes", None, None, future))
        future.result()

    def close(self) -> None:
        """Finish the job in flight, fail the queued ones, stop the child. Idempotent."""
        if self._closing:
            return
        self._closing = True
        self._requests.put(None)
        self._thread.join()
        if self._child is not None:
            self._child.stop(goodbye=None)  # ask it to close its envs, then kill it
            self._child = None

    # -- the feeding thread ------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            item = self._requests.get()
            if item is None:
                return
            kind, payload, timeout_s, future = item
            if not future.set_running_or_notify_cancel():
                continue
            if kind == "end_episodes" and self._child is None:  # no child, no episodes
                future.set_result(None)
                continue
            if self._closing:
                self._resolve(future, kind, payload, ExecStatus.ERROR, "the executor was closed")
                continue
            try:
                reply = self._request(kind, payload, timeout_s)
            except _WorkerFailure as failure:
                self._resolve(future, kind, payload, failure.status, str(failure))
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def _resolve(
        self, future: Future[Any], kind: str, job: EnvJob | None, status: ExecStatus, message: str
    ) -> None:
        if kind == "job" and job is not None:
            future.set_result(ExecResult(job_id=job.job_id, status=status, message=message))
        else:
            future.set_exception(RuntimeError(f"{self._name}: {message}"))

    def _request(self, kind: str, payload: EnvJob | None, timeout_s: float | None) -> Any:
        child = self._ensure_child()
        lost = "the episodes in its slots are lost"
        try:
            child.send((kind, payload), what=f"sending a {kind}")
        except _SEND_ERRORS as error:  # nothing was sent: the child is fine
            raise _WorkerFailure(ExecStatus.ERROR, f"the job could not be sent: {error}") from None
        except WorkerDiedError as error:
            self._child = None
            raise _WorkerFailure(
                ExecStatus.ERROR, f"{error}; it was restarted and {lost}"
            ) from None
        try:
            return child.receive(timeout_s, what=f"running a {kind}")
        except TimeoutError as error:
            self._child = None
            raise _WorkerFailure(
                ExecStatus.TIMEOUT, f"{error}; {self._name} was restarted and {lost}"
            ) from None
        except WorkerDiedError as error:
            self._child = None
            raise _WorkerFailure(
                ExecStatus.ERROR, f"{error}; it was restarted and {lost}"
            ) from None

    def _ensure_child(self) -> ChildProcess:
        if self._child is None:
            child = ChildProcess.fork(
                self._context, _worker_main, (self._env_fn_bytes, self._max_envs), self._name
            )
            # job timeouts start once the child is up: its imports do not count against them
            try:
                ready = child.receive(STARTUP_TIMEOUT_S, what="starting") == "ready"
            except (TimeoutError, WorkerDiedError):
                ready = False
            if not ready:
                code = child.stop()
                raise _WorkerFailure(
                    ExecStatus.ERROR, f"{self._name} did not start (exit code {code})"
                )
            self._child = child
        return self._child


class _WorkerFailure(Exception):
    def __init__(self, status: ExecStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
