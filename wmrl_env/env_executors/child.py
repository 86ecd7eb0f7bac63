"""A child process behind a connection: start it, ask it things with a timeout, notice it die.

One mechanism for every place that runs an environment in another process:
:class:`~wmrl_env.env_executors.workers.ProcessWorker` (a forked worker holding a pool of
envs, ``GymEnvExecutor(backend="process")``) and :class:`~wmrl_env.envs.remote.SubprocessEnv`
(an env in another Python interpreter, e.g. LIBERO's). What crosses the connection is theirs;
this module starts the process, sends and receives with a timeout, turns a dead child into
:class:`WorkerDiedError` (its exit code and the end of its output) and a silent one into
``TimeoutError`` (after killing it), and stops it.

Example:
    >>> import multiprocessing
    >>> def echo(conn):
    ...     conn.send(("echo", conn.recv()))
    >>> child = ChildProcess.fork(multiprocessing.get_context("fork"), echo, (), "an echo")
    >>> child.request("hello", timeout=60, what="echoing")
    ('echo', 'hello')
    >>> child.receive(timeout=60, what="waiting")
    Traceback (most recent call last):
    ...
    wmrl_env.env_executors.child.WorkerDiedError: an echo died while waiting (exit code 0)
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["ChildProcess", "WorkerDiedError"]

LOG_TAIL_CHARACTERS = 4000
_POLL_SECONDS = 1.0  # how often a wait looks whether the child is still alive
_NO_GOODBYE = object()


class WorkerDiedError(RuntimeError):
    """The child process exited (or was killed) while it was in use."""

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ChildProcess:
    """One child process and the parent's end of its connection.

    Start it with :meth:`run_module` (any interpreter, ``python -m module FD`` over a socket
    pair, output to a log file) or :meth:`fork` (a ``multiprocessing`` context, over a pipe).
    Every failure stops the child for good: a caller that wants another starts a new one.

    Args:
        process: a ``subprocess.Popen`` or a started ``multiprocessing`` process.
        conn: the parent's end of the connection.
        name: how messages call the child (``"the worker running pkg.mod:Env"``).
        log: the open file that receives the child's output, if any.
    """

    def __init__(self, process: Any, conn: Connection, name: str, log: Any = None) -> None:
        self.process, self.conn, self.name, self._log = process, conn, name, log
        self._finalizer = weakref.finalize(self, _kill_now, process, conn, log)

    @classmethod
    def run_module(
        cls,
        python: str | os.PathLike[str],
        module: str,
        name: str,
        env_vars: Mapping[str, str] | None = None,
    ) -> ChildProcess:
        """Run ``python -m module FD`` (``FD``: the child's end of a socket pair)."""
        parent_sock, child_sock = socket.socketpair()
        log = tempfile.NamedTemporaryFile(prefix="wmrl-env-worker-", suffix=".log")  # noqa: SIM115
        child_fd = child_sock.fileno()
        try:
            process = subprocess.Popen(
                [str(python), "-m", module, str(child_fd)],
                pass_fds=(child_fd,),
                stdin=subprocess.DEVNULL,  # a question on stdin gets EOF, never a hang
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **dict(env_vars or {})},
            )
        except BaseException:
            parent_sock.close()
            log.close()
            raise
        finally:
            child_sock.close()
        return cls(process, Connection(parent_sock.detach()), name, log)

    @classmethod
    def fork(
        cls, context: Any, target: Callable[..., None], args: Sequence[Any], name: str
    ) -> ChildProcess:
        """Start ``target(conn, *args)`` in a process of the ``multiprocessing`` ``context``."""
        parent, child = context.Pipe()
        process = context.Process(target=target, args=(child, *args), name=name, daemon=True)
        process.start()
        child.close()
        return cls(process, parent, name)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log_path(self) -> str | None:
        """The file that holds the child's output (``run_module`` only)."""
        return None if self._log is None else self._log.name

    @property
    def exit_code(self) -> int | None:
        """The exit code, or ``None`` while the child runs."""
        if isinstance(self.process, subprocess.Popen):
            return self.process.poll()
        return self.process.exitcode

    @property
    def stopped(self) -> bool:
        return not self._finalizer.alive

    def log_tail(self) -> str:
        """The end of the child's output ('' without a log file)."""
        if self._log is None:
            return ""
        try:
            return Path(self._log.name).read_text(errors="replace")[-LOG_TAIL_CHARACTERS:]
        except OSError:
            return ""

    def send(self, message: Any, what: str) -> None:
        """Send ``message``; a broken connection raises :class:`WorkerDiedError`.

        A message that cannot be pickled raises the pickling error, and nothing was sent.
        """
        if self.stopped:
            raise WorkerDiedError(f"{self.name} was stopped before {what}")
        try:
            self.conn.send(message)
        except OSError:
            raise self._died(what) from None

    def receive(self, timeout: float | None, what: str) -> Any:
        """The next message; ``TimeoutError`` after ``timeout`` seconds (the child is killed),
        :class:`WorkerDiedError` if it dies first. Both stop the child."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = (
                _POLL_SECONDS
                if deadline is None
                else min(_POLL_SECONDS, deadline - time.monotonic())
            )
            if wait <= 0:
                message = (
                    f"{self.name} did not answer within {timeout} s while {what}; it was "
                    f"killed. Its last output:\n{self.log_tail()}"
                )
                self.stop()
                raise TimeoutError(message)
            try:
                if self.conn.poll(wait):
                    return self.conn.recv()
            except (EOFError, OSError):
                raise self._died(what) from None
            if self.exit_code is not None:
                raise self._died(what)

    def request(self, message: Any, timeout: float | None, what: str) -> Any:
        """:meth:`send` then :meth:`receive`."""
        self.send(message, what)
        return self.receive(timeout, what)

    def stop(self, goodbye: Any = _NO_GOODBYE, timeout: float = 5.0) -> int | None:
        """Stop the child: send ``goodbye`` (if given) and wait up to ``timeout`` seconds for
        it to exit, then kill it. Returns its exit code. Idempotent."""
        if not self.stopped and goodbye is not _NO_GOODBYE and self.exit_code is None:
            try:
                self.conn.send(goodbye)
                _wait(self.process, timeout)
            except OSError:
                pass
        self._finalizer()
        return self.exit_code

    def _died(self, what: str) -> WorkerDiedError:
        _wait(self.process, 10.0)
        code = self.exit_code
        message = f"{self.name} died while {what} (exit code {code})"
        tail = self.log_tail()
        if tail:
            message += f". Its last output:\n{tail}"
        self.stop()
        return WorkerDiedError(message, code)

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else f"pid {self.pid}"
        return f"<ChildProcess {self.name} ({state})>"


def _wait(process: Any, timeout: float) -> None:
    if isinstance(process, subprocess.Popen):
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    else:
        process.join(timeout)


def _kill_now(process: Any, conn: Connection, log: Any) -> None:
    """Stop the child now (also what garbage collection and interpreter exit do)."""
    conn.close()
    if isinstance(process, subprocess.Popen):
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
    else:
        if process.is_alive():
            process.kill()
        process.join()
    if log is not None:
        log.close()
