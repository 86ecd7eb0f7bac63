"""The host side of the warm pool: one warm server per worker, started inside bubblewrap.

A cold job pays for starting Python and importing its libraries (about 3 s for
scikit-learn). A :class:`WarmServer` imports them once, inside the same bubblewrap root a
cold job gets, and forks one fresh process per job (see
:mod:`wmrl_env.sandboxes.warm_server` for what each fork applies). This module starts the
server, sends it one job at a time with the job's output pipes, pumps the output, enforces
the wall clock (the server kills the job, whose PID namespace dies with it: the host never
names a pid that may have been recycled), and notices a server that died: the job it ran is
reported as an ``error`` and the next job starts a new server.

Example:
    >>> from wmrl_env.sandboxes import Job, LocalSandbox
    >>> with LocalSandbox(timeout_s=20, memory_mb=256, warm=True, preload=("json",)) as sandbox:
    ...     [result] = sandbox.run([Job("import json; print(json.dumps([1]))")])
    >>> result.stdout, result.metadata["warm"]
    ('[1]\\n', True)
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import selectors
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.sandboxes import warm_server
from wmrl_env.sandboxes.isolation import Interpreter, warm_server_argv
from wmrl_env.sandboxes.outcome import ProcessOutcome
from wmrl_env.sandboxes.processes import UidLease, child_pidfds, kill_pidfds

__all__ = ["DEFAULT_PRELOAD", "WARM_TASKS", "WarmServer", "WarmServerError", "run_on_warm_server"]

# what the ML task programs import; a module that is not installed is skipped (and reported)
DEFAULT_PRELOAD = (
    "numpy",
    "scipy",
    "pandas",
    "sklearn",
    "sklearn.linear_model",
    "sklearn.ensemble",
    "sklearn.tree",
    "sklearn.neighbors",
    "sklearn.svm",
    "sklearn.preprocessing",
    "sklearn.impute",
    "sklearn.pipeline",
    "sklearn.model_selection",
    "sklearn.metrics",
)
WARM_TASKS = 4  # bwrap's PID 1, the server, and the job's fork and PID 1 before the program
_READY_TIMEOUT_S = 300.0  # importing scikit-learn takes seconds, more on a loaded machine
_STATUS_GRACE_S = 10.0  # after a kill, how long the server may take to report the status
_DRAIN_SECONDS = 2.0


class WarmServerError(RuntimeError):
    """The warm server could not start, or died: the message says what it printed."""


class WarmServer:
    """A warm server process inside bubblewrap, serving one job at a time.

    Args:
        interpreter: the Python that runs the server (and so the jobs).
        jobs_dir: the host directory holding every job's work directory (bound at /jobs).
        environment: the server's environment (the jobs' without their tokens), so that the
            libraries initialise as they would in a cold job (one BLAS thread, ...).
        preload: modules to import once.
    """

    def __init__(
        self,
        interpreter: Interpreter,
        jobs_dir: Path,
        environment: Mapping[str, str],
        preload: Sequence[str],
    ) -> None:
        # started by root, the server moves into a user namespace of its own before it imports
        # anything, as root there and an unprivileged uid of its own outside
        self._lease = UidLease() if os.geteuid() == 0 else None
        id_map = UidLease.namespace_map(self._lease.uid) if self._lease else ""
        host, server = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        source = Path(warm_server.__file__).read_text(encoding="utf-8")
        command = [interpreter.executable, "-c", source, str(server.fileno()), ",".join(preload)]
        command.append(id_map)
        # the server's own stderr (why it failed), closed by stop()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                warm_server_argv(interpreter, jobs_dir, command),
                cwd="/",
                env=dict(environment),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                pass_fds=(server.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            self._release()
            raise
        finally:
            server.close()
        self._control = host
        self._ready: dict[str, Any] | None = None

    @property
    def uid_outside(self) -> int | None:
        """The host uid the server (and a job that gets no uid of its own) runs as, when it is
        not the caller's: the lease of a server started by root."""
        return self._lease.uid if self._lease is not None else None

    def ready(self) -> dict[str, Any]:
        """Wait until the libraries are imported; what the server reported (``imported``,
        ``failed``, ``preloaded_bytes``). Raises :class:`WarmServerError` if it died."""
        if self._ready is None:
            message = self._receive(time.monotonic() + _READY_TIMEOUT_S)
            if message is None or not message.get("ready"):
                self.stop()
                raise WarmServerError(f"the warm server did not start: {self._why()}")
            self._ready = message
        return self._ready

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def run(
        self,
        request: Mapping[str, Any],
        outcome: ProcessOutcome,
        *,
        deadline: float,
        kill_on_cancel: Callable[[Callable[[], None]], contextlib.AbstractContextManager],
        kill_the_rest: Callable[[], None],
    ) -> None:
        """Run one job (``request``: ``dir``, ``uid``, ``limits``, ``env``), filling
        ``outcome``'s streams, exit status, ``timed_out`` and ``cancelled``.

        Raises:
            WarmServerError: the server died (the job's processes died with it).
        """
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            socket.send_fds(self._control, [json.dumps(request).encode()], [out_write, err_write])
        finally:
            os.close(out_write)
            os.close(err_write)
        streams = {out_read: outcome.stdout, err_read: outcome.stderr}

        def kill() -> None:
            # the server kills its own child (no host pid is named, none can be recycled);
            # the kernel then kills the job's whole PID namespace
            with contextlib.suppress(OSError):
                self._control.send(json.dumps({"kill": True}).encode())
            kill_the_rest()

        def cancel() -> None:
            outcome.cancelled = True
            kill()

        status = None
        try:
            with kill_on_cancel(cancel), selectors.DefaultSelector() as selector:
                for fd in (*streams, self._control.fileno()):
                    selector.register(fd, selectors.EVENT_READ)
                give_up = deadline + _STATUS_GRACE_S
                while status is None:
                    now = time.monotonic()
                    if now >= deadline and not outcome.timed_out and not outcome.cancelled:
                        outcome.timed_out = True
                        kill()
                    if now >= give_up:
                        self.stop()
                        raise WarmServerError("the warm server did not report the job's end")
                    wait = (deadline if now < deadline else give_up) - now
                    for key, _ in selector.select(wait):
                        if key.fd != self._control.fileno():
                            _read_into(key.fd, streams, selector)
                            continue
                        message = self._receive(None)
                        if message is None:
                            raise WarmServerError(f"the warm server died: {self._why()}")
                        if "status" in message:  # ({"init": pid} says it started)
                            status = message["status"]
                kill_the_rest()
                _drain(streams, selector, self._control.fileno())
        finally:
            os.close(out_read)
            os.close(err_read)
        code = warm_server.exit_code(status)
        if code > 128:
            outcome.signal = code - 128
        else:
            outcome.exit_code = code

    def stop(self) -> None:
        """Kill the server (its running job dies with it) and release its socket."""
        # bwrap's child: PID 1 of the server's namespace, in a session of its own; held by a
        # pidfd taken while bwrap (unreaped) is still its parent, so never a recycled pid
        inner = child_pidfds(self.process.pid) if self.process.poll() is None else []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        kill_pidfds(inner)
        self._control.close()
        self._log.close()
        self._release()

    def _release(self) -> None:
        if self._lease is not None:
            self._lease.release()

    def _receive(self, deadline: float | None) -> dict[str, Any] | None:
        """The next message, or None when the server is gone (or the deadline passed)."""
        if deadline is not None:
            self._control.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            data = self._control.recv(1 << 16)
        except (TimeoutError, OSError):
            return None
        finally:
            self._control.settimeout(None)
        return json.loads(data) if data else None

    def _why(self) -> str:
        code = self.process.poll()
        with contextlib.suppress(OSError, ValueError):
            self._log.seek(0)
            lines = self._log.read().decode(errors="replace").strip().splitlines()
            if lines:
                return f"exit status {code}: {lines[-1][:500]}"
        return f"exit status {code}" if code is not None else "no answer"


def run_on_warm_server(
    servers: queue.SimpleQueue[Any],
    replace: Callable[[Any], Any],
    job_id: str,
    execute: Callable[[Any], ExecResult],
    metadata: Mapping[str, Any],
) -> ExecResult:
    """Run one job on an idle server taken from ``servers`` (``replace``-d first when it
    died while idle) and give it back; a server that dies under the job is replaced and the
    job, lost with it, is an ``error`` result."""
    server = servers.get()
    try:
        if not server.alive:
            server = replace(server)
        return execute(server)
    except WarmServerError as error:
        server = replace(server)
        return ExecResult(
            job_id,
            ExecStatus.ERROR,
            message=f"{error}; the job was lost with it, a new server takes the next job",
            metadata=dict(metadata),
        )
    finally:
        servers.put(server)


def _read_into(fd: int, streams: Mapping[int, Any], selector: selectors.BaseSelector) -> None:
    chunk = os.read(fd, 1 << 16)
    if chunk:
        streams[fd].write(chunk)
    else:
        selector.unregister(fd)


def _drain(streams: Mapping[int, Any], selector: selectors.BaseSelector, control: int) -> None:
    """Read what is left in the pipes until both close (every holder is dead) or 2 s."""
    selector.unregister(control)
    deadline = time.monotonic() + _DRAIN_SECONDS
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(max(deadline - time.monotonic(), 0)):
            _read_into(key.fd, streams, selector)
