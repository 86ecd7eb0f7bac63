"""The warm pool of ``DockerSandbox(warm=True)``: one long-lived container per worker that
forks a fresh process per job.

A cold Docker job pays for a new container and for a Python that imports its libraries
before the program runs. Here each worker keeps one container whose first process
(:mod:`~wmrl_env.sandboxes.docker.warm_init`) starts the local warm pool's server
(:mod:`~wmrl_env.sandboxes.warm_server`: the same job protocol, the same per-job isolation:
new mount, PID and IPC namespaces, the job's own work directory at ``/job``, an
unprivileged uid, no capability, no new privileges, and the local jobs' seccomp denylist,
:mod:`~wmrl_env.sandboxes.seccomp`). The container keeps what a cold one has (no network, a
read-only root, memory / CPU / process limits, rlimits, Docker's seccomp profile) and holds
only the capabilities the hand-over needs (:data:`WARM_CAPABILITIES`), none of which a job
keeps. Docker's profile is laxer for a container that holds ``CAP_SYS_ADMIN`` (it then allows
``setns``, ``mount``, ``bpf``, ...), so each job's program installs the denylist itself, as a
local warm job does; the container's first process adds a filter of its own for the server.
``/dev/shm`` and ``/dev/mqueue`` are read-only and empty, so no job leaves anything there for
the next.

A job's files travel through a host directory bound at ``/jobs`` (each job sees only its
own, at ``/job``); the host reads the declared outputs back with the local sandbox's reader,
which follows no link. A job past its wall clock is killed by the warm server (its own
child) on the host's request. A container that dies (killed, its server OOM-killed, the engine
failing) turns its running job into an ``error`` result and is replaced before the next job;
a job that ended is never lost with it (its outputs are on the host).

Example (needs a Docker engine and ``wmrl build-image``)::

    with DockerSandbox(timeout_s=10, warm=True) as sandbox:
        [result] = sandbox.run([Job("import sklearn; print('hi')")])
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import socket
import struct
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl_env.executors.base import ExecResult
from wmrl_env.sandboxes import warm_server
from wmrl_env.sandboxes.docker import warm_init
from wmrl_env.sandboxes.docker.engine import JOB_DIR, check_engine, oom_killed
from wmrl_env.sandboxes.isolation import SERVER_CAPABILITIES
from wmrl_env.sandboxes.job import Job
from wmrl_env.sandboxes.limits import SandboxLimits
from wmrl_env.sandboxes.outcome import ProcessOutcome
from wmrl_env.sandboxes.pool import Cancellation
from wmrl_env.sandboxes.seccomp import job_denylist, server_program
from wmrl_env.sandboxes.warm import WarmServer, WarmServerError, run_on_warm_server
from wmrl_env.sandboxes.workdir import (
    check_inputs,
    collect_outputs,
    job_environment,
    owned_temp_dir,
    prepare_workdir,
    remove_stale_temp_dirs,
    remove_tree,
)
from wmrl_env.utils.imports import require

__all__ = [
    "IMPORT_ALLOWANCE_MB",
    "WARM_CAPABILITIES",
    "DockerWarmPool",
    "DockerWarmServer",
    "WarmContainerSpec",
]

# the local warm server's four (each job's namespaces and mounts; its uid and groups; emptying
# its bounding set), spelled as Docker's --cap-add names them
WARM_CAPABILITIES = tuple(name.removeprefix("CAP_") for name in SERVER_CAPABILITIES)
WARM_TASKS = 4  # the container's first process, the server, the job's fork and its PID 1
IMPORT_ALLOWANCE_MB = 1024  # memory above memory_mb while the server imports its libraries
# a job runs as nobody when the host is root (its files chowned to it); else as the host's
# user, whose files the host can then read and remove
JOB_UID = 65534 if os.geteuid() == 0 else os.geteuid()
_ROOT_PREFIX = "wmrl-docker-warm-"
_CONNECT_TIMEOUT_S = 60.0
_PEERCRED = struct.Struct("3i")  # pid, uid, gid


@dataclass(frozen=True)
class WarmContainerSpec:
    """What every warm container of a pool is made from.

    Attributes:
        client: a ``docker.DockerClient``.
        image: the sandbox image (any with ``python3`` 3.9 or later).
        options: ``containers.create`` options of the sandbox (limits, labels).
        jobs_dir: the host directory holding every job's work directory (bound at /jobs).
        environment: the server's environment (the jobs'), so that the libraries initialise
            as in a cold job.
        preload: modules to import once.
        memory_mb: what a job may use on top of what the container holds once it is ready.
    """

    client: Any
    image: str
    options: Mapping[str, Any]
    jobs_dir: Path
    environment: Mapping[str, str]
    preload: tuple[str, ...]
    memory_mb: int


class DockerWarmServer(WarmServer):
    """One warm container and the host's two connections to it: the server's job protocol,
    and the requests its first process answers."""

    def __init__(self, spec: WarmContainerSpec) -> None:
        self.spec = spec
        self._ready: dict[str, Any] | None = None
        self._control: socket.socket | None = None
        self._requests: socket.socket | None = None
        self._stopped = False
        self._last_words = ""
        self._control_dir = Path(tempfile.mkdtemp(prefix="control-", dir=spec.jobs_dir.parent))
        self._control_dir.chmod(0o711)
        self._socket_path = self._control_dir / "control.sock"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(str(self._socket_path))
        self._socket_path.chmod(0o666)  # who may connect is checked by pid (SO_PEERCRED)
        self._listener.listen(4)
        self.container = None
        try:
            self._create()
        except BaseException:
            self.stop()
            raise

    def _create(self) -> None:
        spec = self.spec
        mount = require("docker", "DockerSandbox").types.Mount
        command = [
            "python3",
            "-c",
            Path(warm_init.__file__).read_text(encoding="utf-8"),
            f"{warm_init.CONTROL_DIR}/control.sock",
            Path(warm_server.__file__).read_text(encoding="utf-8"),
            ",".join(spec.preload),
            server_program().hex(),
        ]
        self.container = spec.client.containers.create(
            spec.image,
            command=command,
            user="0:0",
            working_dir="/",
            cap_add=list(WARM_CAPABILITIES),
            ipc_mode="none",  # each job makes its own IPC namespace
            tmpfs={
                JOB_DIR: "ro,size=4k",  # where each job's own directory is bound
                "/dev/shm": "ro,size=4k",
                "/dev/mqueue": "ro,size=4k",  # else writable by all, shared by all jobs
            },
            mounts=[
                mount(warm_server.JOBS_DIR, str(spec.jobs_dir), type="bind"),
                mount(warm_init.CONTROL_DIR, str(self._control_dir), type="bind"),
            ],
            environment=dict(spec.environment),
            **spec.options,
        )
        self.container.start()

    def ready(self) -> dict[str, Any]:
        """Wait until the container's server has imported its libraries, then fit the
        memory limit to ``memory_mb`` above what the container holds. Raises
        :class:`~wmrl_env.sandboxes.warm.WarmServerError` if it died."""
        if self._ready is None:
            self._accept(time.monotonic() + _CONNECT_TIMEOUT_S)
            super().ready()
            try:
                self._fit_memory()
            except Exception as error:  # no answer, or the engine refused the new limit
                self.stop()
                raise WarmServerError(f"fitting the memory limit failed: {self._why()}") from error
        return self._ready

    @property
    def alive(self) -> bool:
        if self._stopped:
            return False
        if self._requests is None:
            return True  # still starting: ready() says whether it did
        return not any(_hung_up(connection) for connection in (self._control, self._requests))

    def stop(self) -> None:
        """Remove the container (its running job dies with it) and close the connections;
        what the container said last stays for :meth:`_why`."""
        if self._stopped:
            return
        self._stopped = True
        self._last_words = self._describe() if self.container is not None else "not created"
        for connection in (self._listener, self._control, self._requests):
            if connection is not None:
                connection.close()
        if self.container is not None:
            with contextlib.suppress(Exception):  # gone already, or the engine is
                self.container.remove(force=True)
        with contextlib.suppress(OSError):
            remove_tree(self._control_dir)

    def _accept(self, deadline: float) -> None:
        """Take the first process's two connections, refusing any other process's."""
        self.container.reload()
        first_process = self.container.attrs["State"]["Pid"]
        connections: list[socket.socket] = []
        self._listener.settimeout(0.5)
        while len(connections) < 2:
            if time.monotonic() > deadline or not first_process:
                self.stop()
                raise WarmServerError(f"the warm container did not connect: {self._why()}")
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                self.container.reload()
                first_process = self.container.attrs["State"]["Pid"]
                continue
            peer = _PEERCRED.unpack(
                connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            )[0]
            if peer == first_process:
                connections.append(connection)
            else:
                connection.close()
        self._listener.close()
        self._socket_path.unlink()
        self._control, self._requests = connections

    def _fit_memory(self) -> None:
        self._requests.send(json.dumps({"usage": True}).encode())
        self._requests.settimeout(30)
        try:
            usage = json.loads(self._requests.recv(1 << 12))
        finally:
            self._requests.settimeout(None)
        limit = (self.spec.memory_mb << 20) + usage["usage"]
        self.container.update(mem_limit=limit, memswap_limit=limit)
        self._ready.update(container_bytes=usage["usage"], container_tasks=usage["pids"])

    def _why(self) -> str:
        return self._last_words if self._stopped else self._describe()

    def _describe(self) -> str:
        """The container's state and the last line it printed."""
        try:
            self.container.reload()
            state = self.container.attrs["State"]
            lines = self.container.logs(tail=20).decode(errors="replace").strip().splitlines()
        except Exception as error:  # removed, or the engine is gone
            return f"container {self.container.id[:12]}: {error}"
        oom = ", OOM-killed" if state.get("OOMKilled") else ""
        last = f": {lines[-1][:500]}" if lines else ""
        return f"container {self.container.id[:12]} {state['Status']}{oom}{last}"


class DockerWarmPool:
    """One :class:`DockerWarmServer` per worker, and the jobs run on them.

    Args:
        client: a ``docker.DockerClient``.
        image: the sandbox image.
        options: ``containers.create`` options for every container (limits, labels).
        limits: the sandbox's limits.
        env: extra environment variables for every job.
        preload: modules each container imports once.
        workers: containers (one job at a time each).
        metadata: what every result says about the sandbox.
    """

    def __init__(
        self,
        client: Any,
        image: str,
        options: Mapping[str, Any],
        *,
        limits: SandboxLimits,
        env: Mapping[str, str],
        preload: Sequence[str],
        workers: int,
        metadata: Mapping[str, Any],
    ) -> None:
        self._limits = limits
        self.metadata = {**metadata, "filesystem": "private", "warm": True}
        remove_stale_temp_dirs(_ROOT_PREFIX)
        self._root = owned_temp_dir(_ROOT_PREFIX)
        self._jobs = self._root / "jobs"
        self._jobs.mkdir()
        for path in (self._root, self._jobs):  # traversable by the container, not listable
            path.chmod(0o711)
        self.spec = WarmContainerSpec(
            client=client,
            image=image,
            options=dict(options),
            jobs_dir=self._jobs,
            environment=job_environment(JOB_DIR, "/usr/bin", env),
            preload=tuple(preload),
            memory_mb=limits.memory_mb,
        )
        self._servers: queue.SimpleQueue[DockerWarmServer] = queue.SimpleQueue()
        self._all_servers: list[DockerWarmServer] = []
        try:
            for _ in range(workers):
                self._servers.put(self._start())
        except BaseException:
            self.close()
            raise

    def run(self, job: Job, cancellation: Cancellation) -> ExecResult:
        """Run ``job`` on an idle container (replaced first if it died)."""
        return run_on_warm_server(
            self._servers,
            self._replace,
            job.job_id,
            lambda server: self._execute(job, cancellation, server),
            self.metadata,
        )

    def containers(self) -> list[str]:
        """Ids of the warm containers that wait for jobs or run one."""
        return [server.container.id for server in self._all_servers if server.alive]

    def close(self) -> None:
        """Remove every container and the jobs' directory (after the pool's jobs ended)."""
        for server in self._all_servers:
            server.stop()
        with contextlib.suppress(OSError):
            remove_tree(self._root)

    def _execute(
        self, job: Job, cancellation: Cancellation, server: DockerWarmServer
    ) -> ExecResult:
        server.ready()  # the first job waits for the imports, outside its wall clock
        start, since = time.monotonic(), time.time()
        timeout_s = self._limits.timeout_for(job.timeout_s)
        outcome = ProcessOutcome.under(self._limits, timeout_s)
        workdir = Path(tempfile.mkdtemp(prefix="job-", dir=self._jobs))
        try:
            _prepare(workdir, job)
            environment = self.spec.environment
            seccomp = job_denylist()
            request = {
                "dir": workdir.name,
                "uid": JOB_UID,
                "env": environment,
                "limits": {},
                "seccomp": seccomp.hex() if seccomp else None,
            }
            server.run(
                request,
                outcome,
                deadline=start + timeout_s,
                kill_on_cancel=cancellation.kill_on_cancel,
                kill_the_rest=lambda: None,  # the job's PID namespace died with its PID 1
            )
            if outcome.signal == signal.SIGKILL and not (outcome.timed_out or outcome.cancelled):
                outcome.oom_killed = oom_killed(self.spec.client, server.container.id, since)
            outcome.outputs, outcome.output_problems = collect_outputs(
                workdir, job.output_files, self._limits.max_collect_bytes
            )
        finally:
            with contextlib.suppress(OSError):
                remove_tree(workdir)
        outcome.seconds = time.monotonic() - start
        return outcome.to_result(job, {**self.metadata, "container": server.container.id[:12]})

    def _start(self) -> DockerWarmServer:
        try:
            server = DockerWarmServer(self.spec)
        except Exception:
            check_engine(self.spec.client)  # a clear error when the engine is gone
            raise
        self._all_servers.append(server)
        return server

    def _replace(self, server: DockerWarmServer) -> DockerWarmServer:
        server.stop()
        if server in self._all_servers:
            self._all_servers.remove(server)
        return self._start()


def _prepare(workdir: Path, job: Job) -> None:
    """The job's files, its directory searchable by the server (root without
    ``CAP_DAC_OVERRIDE`` enters it before dropping to the job's uid): through group 0 when
    the host is root, else through ``o+x`` (the parent is not listable, the name random)."""
    as_root = os.geteuid() == 0
    inputs = check_inputs(job.inputs)
    prepare_workdir(workdir, job.program, inputs, copy=True, uid=JOB_UID if as_root else None)
    if as_root:
        os.chown(workdir, JOB_UID, 0)
    workdir.chmod(0o710 if as_root else 0o711)


def _hung_up(connection: socket.socket) -> bool:
    """True when the other end closed (between jobs nothing else makes it readable)."""
    poller = select.poll()
    poller.register(connection, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(0))
