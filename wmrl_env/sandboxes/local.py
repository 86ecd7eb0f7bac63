"""The local process sandbox: the embedded default, no daemon needed (Linux).

Each job runs as ``python3 main.py`` in a fresh temporary work directory, in its own process
group, under resource limits, behind the best isolation level that works on this machine
(``bwrap`` > ``unshare`` > ``rlimits``, see :mod:`wmrl_env.sandboxes.isolation`), with its
stdout/stderr cut to a size cap and its declared output files collected and scored on the
host. When the main process exits, times out or the sandbox closes, every process the job
started is killed.

Example:
    >>> from wmrl_env.sandboxes import Job, JsonScore, LocalSandbox
    >>> program = "import json; json.dump({'score': 0.5}, open('score.json', 'w'))"
    >>> score = JsonScore("score.json")
    >>> with LocalSandbox(timeout_s=20, memory_mb=256) as sandbox:
    ...     [result] = sandbox.run([Job(program, output_files=score.files, scorer=score)])
    >>> result.status.value, result.score
    ('ok', 0.5)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import queue
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wmrl_env.executors.base import ExecResult
from wmrl_env.sandboxes.isolation import (
    JOB_DIR_IN_BWRAP,
    LEVELS,
    SHM_BYTES,
    Interpreter,
    Isolation,
    JobCommand,
)
from wmrl_env.sandboxes.job import Job
from wmrl_env.sandboxes.limits import SandboxLimits
from wmrl_env.sandboxes.outcome import ProcessOutcome, TailBuffer
from wmrl_env.sandboxes.pool import Cancellation, JobPool, PooledSandbox
from wmrl_env.sandboxes.processes import (
    UidLease,
    children,
    count_tasks,
    kill_until_gone,
    pids_where,
)
from wmrl_env.sandboxes.seccomp import job_denylist
from wmrl_env.sandboxes.warm import DEFAULT_PRELOAD, WARM_TASKS, WarmServer, run_on_warm_server
from wmrl_env.sandboxes.workdir import (
    check_inputs,
    collect_outputs,
    job_environment,
    owned_temp_dir,
    prepare_workdir,
    remove_stale_temp_dirs,
    remove_tree,
)

__all__ = ["LocalSandbox", "SandboxUnavailableError", "is_weak"]

_TOKEN_VARIABLE = "WMRL_SANDBOX_TOKEN"
_ROOT_PREFIX = "wmrl-sandbox-"
_DRAIN_SECONDS = 2.0  # reading what is left in the pipes after every process is killed
_WARNED: set[str] = set()


class SandboxUnavailableError(RuntimeError):
    """The requested isolation level does not work on this machine."""


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class LocalSandbox(PooledSandbox):
    """Run jobs as local processes under limits and the best available isolation.

    Args:
        timeout_s: wall-clock seconds per job (a job's own ``timeout_s`` overrides it).
        memory_mb: address-space limit per process (``RLIMIT_AS``); numpy + pandas +
            scikit-learn need ~350 MB of address space just to import.
        max_processes: processes and threads per job (``RLIMIT_NPROC``; exact when the
            sandbox runs as root, which gives each job its own uid).
        max_output_bytes: stdout and stderr are each cut to their last this-many bytes.
        max_file_mb: the largest file a job may write (``RLIMIT_FSIZE``).
        isolation: ``"auto"`` (the best that works, with a one-time warning when it is not
            ``bwrap``), or one of ``"bwrap"``, ``"unshare"``, ``"rlimits"`` (required: an
            error when it does not work here).
        allow_weak_isolation: the sandbox fails closed: it refuses (``SandboxUnavailableError``
            naming the fix) to start when the only isolation that works leaves the host's
            file system visible or runs jobs as root (:func:`is_weak`), unless this is True.
            Then it is fit for trusted programs only; every result says
            ``metadata["weak_isolation"]``.
        python: the interpreter that runs jobs (default: this one, ``sys.executable``); its
            packages (numpy, pandas, scikit-learn, ...) are what jobs can import.
        max_workers: jobs run at once (default: the CPUs this process may use).
        env: extra environment variables for every job; nothing else is inherited.
        warm: run jobs on a warm pool (needs ``bwrap``): one server per worker imports
            ``preload`` once inside the sandbox and forks a fresh process per job, under the
            same isolation and limits (see :mod:`wmrl_env.sandboxes.warm`). The address-space
            limit is ``memory_mb`` *plus* what the preloaded libraries occupy, so a program
            has the room it would have in a cold job that imported them itself.
        preload: the modules a warm server imports (missing ones are skipped).

    Every result's ``metadata`` says what was applied: ``isolation``, ``network``
    (``"none"`` or ``"host"``), ``filesystem`` (``"private"`` or ``"host"``), ``uid``
    (``"dedicated"`` or ``"caller"``), ``process_limit``, ``seccomp`` (``"denylist"``
    at the bwrap level, see :mod:`~wmrl_env.sandboxes.seccomp`; else ``"none"``) and ``warm``.
    """

    def __init__(
        self,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        *,
        max_processes: int = 64,
        max_output_bytes: int = 1 << 20,
        max_file_mb: int = 256,
        isolation: str = "auto",
        python: str | None = None,
        max_workers: int | None = None,
        env: Mapping[str, str] | None = None,
        allow_weak_isolation: bool = False,
        warm: bool = False,
        preload: Sequence[str] = DEFAULT_PRELOAD,
    ) -> None:
        if sys.platform != "linux":
            raise SandboxUnavailableError("LocalSandbox needs Linux (rlimits, /proc, namespaces)")
        self.limits = SandboxLimits(
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            max_processes=max_processes,
            max_output_bytes=max_output_bytes,
            max_file_mb=max_file_mb,
        )
        self.interpreter = Interpreter.inspect(python or sys.executable)
        self.isolation, self.dedicated_uid = _choose_isolation(
            isolation, self.interpreter, allow_weak_isolation
        )
        self.allow_weak_isolation = allow_weak_isolation
        self._env = dict(env or {})
        self._token = uuid.uuid4().hex
        remove_stale_temp_dirs(_ROOT_PREFIX)  # work directories of killed owners
        self._root = owned_temp_dir(_ROOT_PREFIX)
        self._root.chmod(0o711)  # a job's uid may enter its own directory, list no other
        workers = max_workers or _available_cpus()
        self._pool = JobPool(self._run_one, workers, "wmrl-local")
        self.warm = warm and self.isolation.name == "bwrap"
        if warm and not self.warm:
            warnings.warn(
                f"LocalSandbox: the warm pool needs bwrap, not {self.isolation.name!r}; "
                "jobs run cold",
                RuntimeWarning,
                stacklevel=2,
            )
        self._preload = tuple(preload)
        self._servers: queue.SimpleQueue[WarmServer] = queue.SimpleQueue()
        self._all_servers: list[WarmServer] = []
        for _ in range(workers if self.warm else 0):
            self._servers.put(self._start_server())
        self._finalizer = weakref.finalize(
            self, _shut_down, self._pool, self._root, self._all_servers
        )

    @property
    def metadata(self) -> dict[str, Any]:
        """What every result of this sandbox says about its isolation."""
        if self.dedicated_uid:
            process_limit = "per job (dedicated uid)"
        elif os.geteuid() == 0:
            process_limit = "not enforced (root without a dedicated uid)"
        else:
            process_limit = f"shared with every process of uid {os.getuid()} (approximate)"
        return {
            "backend": "local",
            **self.isolation.metadata(),
            "uid": "dedicated" if self.dedicated_uid else "caller",
            "process_limit": process_limit,
            "weak_isolation": is_weak(self.isolation, self.dedicated_uid),
            "allow_weak_isolation": self.allow_weak_isolation,
            "seccomp": "denylist" if _seccomp_for(self.isolation) else "none",
            "warm": self.warm,
        }

    def _run_one(self, job: Job, cancellation: Cancellation) -> ExecResult:
        if not self.warm:
            return self._execute(job, cancellation, None)
        return run_on_warm_server(
            self._servers,
            self._replace,
            job.job_id,
            lambda server: self._execute(job, cancellation, server),
            self.metadata,
        )

    def _execute(
        self, job: Job, cancellation: Cancellation, server: WarmServer | None
    ) -> ExecResult:
        return _execute(
            job,
            isolation=self.isolation,
            interpreter=self.interpreter,
            limits=self.limits,
            dedicated_uid=self.dedicated_uid,
            root=self._root,
            env={**self._env, _TOKEN_VARIABLE: f"{self._token}:{uuid.uuid4().hex}"},
            cancellation=cancellation,
            server=server,
        ).to_result(job, self.metadata)

    def _start_server(self) -> WarmServer:
        bin_dir = os.path.dirname(self.interpreter.executable)
        environment = job_environment(JOB_DIR_IN_BWRAP, bin_dir, self._env)
        environment[_TOKEN_VARIABLE] = f"{self._token}:server"
        server = WarmServer(self.interpreter, self._root, environment, self._preload)
        self._all_servers.append(server)
        return server

    def _replace(self, server: WarmServer) -> WarmServer:
        server.stop()
        self._all_servers.remove(server)
        return self._start_server()

    def warm_servers(self) -> list[int]:
        """Pids of the warm servers (and their bubblewrap) that wait for jobs."""
        return [s.process.pid for s in self._all_servers if s.alive]

    def live_processes(self) -> list[int]:
        """Pids of processes still running for this sandbox's jobs (none between jobs; the
        idle warm servers are not jobs, see :meth:`warm_servers`)."""
        servers = set(self.warm_servers())  # bwrap, its PID 1 of the server's namespace,
        for _ in range(2):  # and the server
            servers |= {child for pid in servers for child in children(pid)}
        return [
            pid for pid in pids_where(env=f"{_TOKEN_VARIABLE}={self._token}:") if pid not in servers
        ]


def _shut_down(pool: JobPool, root: Path, servers: list[WarmServer]) -> None:
    pool.close()
    for server in servers:
        server.stop()
    with contextlib.suppress(OSError):
        remove_tree(root)


def _execute(
    job: Job,
    *,
    isolation: Isolation,
    interpreter: Interpreter,
    limits: SandboxLimits,
    dedicated_uid: bool,
    root: Path,
    env: Mapping[str, str],
    cancellation: Cancellation,
    server: WarmServer | None = None,
) -> ProcessOutcome:
    """Run one job from a fresh work directory to a collected, unclassified outcome, as a
    new process (cold) or forked by a warm ``server``."""
    start = time.monotonic()
    timeout_s = limits.timeout_for(job.timeout_s)
    inputs = check_inputs(job.inputs)
    workdir = Path(tempfile.mkdtemp(prefix="job-", dir=root))
    lease = UidLease() if dedicated_uid else None
    try:
        uid = lease.uid if lease else None
        copy = isolation.name != "bwrap" or server is not None  # a server sees no host path
        seccomp = _seccomp_for(isolation)
        # a warm job without a uid of its own runs as its server's
        owner = uid if uid is not None or server is None else server.uid_outside
        prepare_workdir(workdir, job.program, inputs, copy=copy, uid=owner)
        max_processes = limits.max_processes
        if uid is None and server is not None:
            # the job keeps the server's uid (its user namespace's root, never the host's):
            # RLIMIT_NPROC also counts the server and the job's two forks before the program
            # (and bwrap's PID 1, without root)
            max_processes += WARM_TASKS
        elif uid is None and os.geteuid() != 0:  # RLIMIT_NPROC counts all the user's tasks
            max_processes += count_tasks(os.getuid())
        command = JobCommand(
            interpreter=interpreter,
            workdir=workdir,
            inputs=inputs if isolation.name == "bwrap" else {},
            memory_bytes=limits.memory_bytes,
            cpu_seconds=math.ceil(timeout_s) + 2,
            max_processes=max_processes,
            max_file_bytes=limits.max_file_mb << 20,
            max_open_files=limits.max_open_files,
            uid=uid,
        )
        bin_dir = os.path.dirname(interpreter.executable)
        environment = job_environment(isolation.job_dir(workdir), bin_dir, env)
        outcome = ProcessOutcome.under(limits, timeout_s)

        def kill_the_rest() -> None:
            if isolation.pid_namespace:  # warm jobs too: each has a PID namespace of its own
                return  # the kernel kills the namespace with its first process
            if uid is not None:
                kill_until_gone(lambda: pids_where(uid=uid))
            else:  # the token is unique to this job: "<sandbox token>:<job token>"
                kill_until_gone(lambda: pids_where(env=f"{_TOKEN_VARIABLE}={env[_TOKEN_VARIABLE]}"))

        if server is not None:
            preloaded = server.ready()["preloaded_bytes"]
            request = {
                "dir": workdir.name,
                "uid": uid,
                "env": environment,
                "seccomp": seccomp.hex() if seccomp else None,
                "shm_bytes": SHM_BYTES,
                "limits": {
                    "as": command.memory_bytes + preloaded,
                    "cpu": command.cpu_seconds,
                    "nproc": command.max_processes,
                    "fsize": command.max_file_bytes,
                    "nofile": command.max_open_files,
                    "core": 0,
                },
            }
            server.run(
                request,
                outcome,
                deadline=start + timeout_s,
                kill_on_cancel=cancellation.kill_on_cancel,
                kill_the_rest=kill_the_rest,
            )
        else:
            seccomp_fd = _readable_fd(seccomp) if seccomp else None
            try:
                _run_process(
                    isolation.argv(dataclasses.replace(command, seccomp_fd=seccomp_fd)),
                    workdir,
                    environment,
                    outcome,
                    deadline=start + timeout_s,
                    cancellation=cancellation,
                    kill_the_rest=kill_the_rest,
                    signal_in_exit_status=isolation.pid_namespace,
                    pass_fds=() if seccomp_fd is None else (seccomp_fd,),
                )
            finally:
                if seccomp_fd is not None:
                    os.close(seccomp_fd)
        outcome.outputs, outcome.output_problems = collect_outputs(
            workdir, job.output_files, limits.max_collect_bytes
        )
    finally:
        with contextlib.suppress(OSError):
            remove_tree(workdir)
        if lease:
            lease.release()
    outcome.seconds = time.monotonic() - start
    return outcome


def _seccomp_for(isolation: Isolation) -> bytes | None:
    """The seccomp filter for jobs at ``isolation`` (bwrap only: the other levels have no
    tool that installs one), or None where this architecture has no syscall table."""
    return job_denylist() if isolation.name == "bwrap" else None


def _readable_fd(data: bytes) -> int:
    """A pipe's read end holding ``data`` (small: it must fit the pipe's buffer)."""
    read, write = os.pipe()
    try:
        os.write(write, data)
    finally:
        os.close(write)
    return read


def _run_process(
    argv: Sequence[str],
    workdir: Path,
    environment: Mapping[str, str],
    outcome: ProcessOutcome,
    *,
    deadline: float,
    cancellation: Cancellation,
    kill_the_rest: Callable[[], None],
    signal_in_exit_status: bool,
    pass_fds: Sequence[int] = (),
) -> None:
    """Start the job, pump its output until it exits or the deadline, kill what is left."""
    process = subprocess.Popen(
        argv,
        cwd=workdir,
        env=dict(environment),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=pass_fds,
    )

    def kill_group() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    def cancel() -> None:
        outcome.cancelled = True
        kill_group()

    streams = {process.stdout.fileno(): outcome.stdout, process.stderr.fileno(): outcome.stderr}
    try:
        with cancellation.kill_on_cancel(cancel):
            exited = _pump(process, streams, deadline)
            if not exited and not outcome.cancelled:
                outcome.timed_out = True
            kill_group()
            kill_the_rest()
            _pump(process, streams, time.monotonic() + _DRAIN_SECONDS, until_eof=True)
            returncode = process.wait()
    finally:
        process.stdout.close()
        process.stderr.close()
    if returncode < 0:
        outcome.signal = -returncode
    elif signal_in_exit_status and returncode > 128:
        outcome.signal = returncode - 128  # reported by bwrap / the shell in between
    else:
        outcome.exit_code = returncode


def _pump(
    process: subprocess.Popen[bytes],
    streams: dict[int, TailBuffer],
    deadline: float,
    *,
    until_eof: bool = False,
) -> bool:
    """Copy output into the buffers until the process exits (or, with ``until_eof``, until
    both pipes close) or the deadline passes; True when it ended before the deadline."""
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            with contextlib.suppress(ValueError):  # already at EOF
                selector.register(fd, selectors.EVENT_READ)
        exit_fd = _exit_fd(process) if not until_eof else None
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                if not until_eof and process.poll() is not None:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                wait = remaining if exit_fd is not None or until_eof else min(remaining, 0.02)
                for key, _ in selector.select(wait):
                    if key.fd == exit_fd:
                        return True
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        streams[key.fd].write(chunk)
                    else:
                        selector.unregister(key.fd)
            return until_eof or process.wait(max(deadline - time.monotonic(), 0)) is not None
        except subprocess.TimeoutExpired:
            return False
        finally:
            if exit_fd is not None:
                os.close(exit_fd)


def _exit_fd(process: subprocess.Popen[bytes]) -> int | None:
    """A pidfd that becomes readable when the process exits (Linux >= 5.3), if available."""
    try:
        return os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        return None


@functools.lru_cache(maxsize=16)
def _probe(level: Isolation, interpreter: Interpreter, dedicated_uid: bool) -> str | None:
    """Run a trivial job at ``level``; None when it works, else what went wrong."""
    if not level.available():
        return f"{level.tool} is not installed"
    root = Path(tempfile.mkdtemp(prefix="wmrl-probe-"))
    root.chmod(0o711)
    # the job's uid must reach the interpreter's own files (a python under a 0700 home can
    # start from a fallback library, then fail to start a subprocess): check both
    program = (
        "import os, subprocess, sys\n"
        "print(os.path.realpath(sys.base_prefix))\n"
        "subprocess.run([sys.executable, '-c', 'print(\"ok\")'], check=True)\n"
    )
    job = Job(program)
    try:
        outcome = _execute(
            job,
            isolation=level,
            interpreter=interpreter,
            limits=SandboxLimits(timeout_s=60, memory_mb=256),
            dedicated_uid=dedicated_uid,
            root=root,
            env={_TOKEN_VARIABLE: f"probe:{uuid.uuid4().hex}"},
            cancellation=Cancellation(),
        )
    finally:
        remove_tree(root)
    if outcome.stdout.text().split() == [interpreter.base_prefix, "ok"]:
        return None
    status, message = outcome.status()
    return f"{message or status}: {outcome.stderr.text().strip()[-500:]}"


def is_weak(level: Isolation, dedicated_uid: bool) -> bool:
    """True when jobs would see the host's file system (and the datasets and answers on it),
    or run as root (no process limit, root's files in reach): fit for trusted programs only.

    >>> from wmrl_env.sandboxes.isolation import LEVELS
    >>> [is_weak(level, dedicated_uid=True) for level in LEVELS]
    [False, True, True]
    """
    as_root_without_own_uid = os.geteuid() == 0 and not dedicated_uid
    return level.filesystem != "private" or as_root_without_own_uid


def _choose_isolation(
    requested: str, interpreter: Interpreter, allow_weak: bool
) -> tuple[Isolation, bool]:
    """The isolation level (and whether jobs get a dedicated uid) that works here; a weak
    one (:func:`is_weak`) only when ``allow_weak``."""
    names = [level.name for level in LEVELS]
    if requested != "auto" and requested not in names:
        raise ValueError(f"isolation must be 'auto' or one of {names}, got {requested!r}")
    candidates = [level for level in LEVELS if requested in ("auto", level.name)]
    problems = []
    as_root = os.geteuid() == 0
    refused = False
    for level in candidates:
        for dedicated_uid in (True, False) if as_root else (False,):
            name = f"{level.name}{' (dedicated uid)' if dedicated_uid else ''}"
            if is_weak(level, dedicated_uid) and not allow_weak:
                refused = True
                continue
            problem = _probe(level, interpreter, dedicated_uid)
            if problem is None:
                _warn_once(level, dedicated_uid, as_root, problems)
                return level, dedicated_uid
            problems.append(f"{name}: {problem}")
    if refused:
        raise SandboxUnavailableError(_refusal(requested, problems, as_root))
    raise SandboxUnavailableError(
        f"no isolation level {requested!r} works here:\n  " + "\n  ".join(problems)
    )


def _refusal(requested: str, problems: list[str], as_root: bool) -> str:
    why = "\n  ".join(problems) or f"isolation={requested!r} was requested"
    fixes = ["install bubblewrap (`apt-get install bubblewrap`)"]
    if as_root:
        fixes.append(
            "or run as a non-root user (as root, jobs need their own uid, which must be able "
            "to execute the interpreter: a Python under /root is out of its reach)"
        )
    return (
        "LocalSandbox refuses to run untrusted programs here: the only isolation that works "
        "would leave the host's file system visible (datasets, answers) and writable where "
        "the job's uid may write, or run jobs as root without a process limit.\n"
        f"Why the full sandbox does not work:\n  {why}\n"
        f"Fix: {', '.join(fixes)}. To run only programs you trust under resource limits, pass "
        "allow_weak_isolation=True (every result then says metadata['weak_isolation'])."
    )


def _warn_once(level: Isolation, dedicated_uid: bool, as_root: bool, problems: list[str]) -> None:
    weaker = []
    if level.name != "bwrap":
        weaker.append(
            f"using isolation {level.name!r}: network {level.network}, the host's file system "
            "is visible (and writable where the job's uid may write); install bubblewrap "
            "(apt-get install bubblewrap) for the full sandbox"
        )
    if as_root and not dedicated_uid:
        weaker.append(
            "jobs run as root: the process limit is not enforced and root's files are reachable"
        )
    key = f"{level.name}/{dedicated_uid}"
    if weaker and key not in _WARNED:
        _WARNED.add(key)
        reasons = "; ".join(problems) if problems else "requested"
        warnings.warn(
            "LocalSandbox: allow_weak_isolation=True: fit for trusted programs only: "
            + "; ".join(weaker)
            + f" (why: {reasons})",
            RuntimeWarning,
            stacklevel=4,
        )
