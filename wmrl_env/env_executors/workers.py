"""Worker processes for ``GymEnvExecutor(backend="process")``: each holds its own envs.

A :class:`ProcessWorker` owns one child process (holding an :class:`EnvPool`) and one thread
that feeds it jobs one at a time over a pipe. A job that outlives its timeout gets the child
killed; a child that dies (a segfaulting simulator) is reported as ``crashed``. Either way the
next job starts a fresh child, and only the envs of that child are lost.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle

from wmrl_env.env_executors.play import EnvDescription, EnvFactory, EnvJob, EnvPool
from wmrl_env.executors.base import ExecResult, ExecStatus

__all__ = ["ProcessWorker"]

_SEND_ERRORS = (pickle.PicklingError, TypeError, AttributeError)
STARTUP_TIMEOUT_S = 300.0


def _worker_main(conn: Connection, env_fn_bytes: bytes) -> None:
    """Child process: say ``"ready"``, then serve ``("job", EnvJob)`` and ``("describe", None)``
    until ``None``."""
    pool = EnvPool(cloudpickle.loads(env_fn_bytes))
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

    def __init__(self, env_fn: EnvFactory, start_method: str | None, name: str) -> None:
        self._env_fn_bytes = cloudpickle.dumps(env_fn)
        self._context = worker_context(start_method)
        self._name = name
        self._process: Any = None
        self._conn: Connection | None = None
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

    def close(self) -> None:
        """Finish the job in flight, fail the queued ones, stop the child. Idempotent."""
        if self._closing:
            return
        self._closing = True
        self._requests.put(None)
        self._thread.join()
        self._stop_child(polite=True)

    # -- the feeding thread ------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            item = self._requests.get()
            if item is None:
                return
            kind, payload, timeout_s, future = item
            if not future.set_running_or_notify_cancel():
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
        conn = self._ensure_child()
        start = time.perf_counter()
        try:
            conn.send((kind, payload))
        except _SEND_ERRORS as error:  # nothing was sent: the child is fine
            raise _WorkerFailure(ExecStatus.ERROR, f"the job could not be sent: {error}") from None
        except OSError as error:
            self._stop_child()
            raise _WorkerFailure(ExecStatus.CRASHED, f"worker pipe broken: {error}") from None
        if not conn.poll(timeout_s):
            self._stop_child()
            raise _WorkerFailure(
                ExecStatus.TIMEOUT,
                f"no result after {time.perf_counter() - start:.1f} s (limit {timeout_s} s); "
                f"{self._name} was restarted and the episodes in its slots are lost",
            )
        try:
            return conn.recv()
        except (EOFError, OSError):
            code = self._stop_child()
            raise _WorkerFailure(
                ExecStatus.CRASHED,
                f"{self._name} died (exit code {code}); it was restarted and the episodes in "
                "its slots are lost",
            ) from None

    def _ensure_child(self) -> Connection:
        if self._conn is None:
            parent, child = self._context.Pipe()
            self._process = self._context.Process(
                target=_worker_main, args=(child, self._env_fn_bytes), name=self._name, daemon=True
            )
            self._process.start()
            child.close()
            self._conn = parent
            # job timeouts start once the child is up: its imports do not count against them
            try:
                ready = parent.poll(STARTUP_TIMEOUT_S) and parent.recv() == "ready"
            except (EOFError, OSError):
                ready = False
            if not ready:
                code = self._stop_child()
                raise _WorkerFailure(
                    ExecStatus.CRASHED, f"{self._name} did not start (exit code {code})"
                )
        return self._conn

    def _stop_child(self, polite: bool = False) -> int | None:
        """Stop the child (asking first when ``polite``, else killing it); its exit code."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if process is None:
            return None
        if polite and conn is not None:
            try:
                conn.send(None)
                process.join(timeout=5.0)
            except OSError:
                pass
        if process.is_alive():
            process.kill()
        process.join()
        if conn is not None:
            conn.close()
        return process.exitcode


class _WorkerFailure(Exception):
    def __init__(self, status: ExecStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
