"""The Docker sandbox: one fresh container per job (docker SDK, extra ``docker``).

Each job gets a container with no network, a read-only root file system, a size-capped
``tmpfs`` work directory at ``/job`` (nothing the job writes touches the host's disk), its
inputs bind-mounted read-only, memory / CPU / process limits, all capabilities dropped, and
an unprivileged user. The container's first process only sleeps; the program runs as
``python3 main.py`` through ``docker exec``, so that after it exits (or times out) every
process it left behind is killed while its work directory still exists, and the declared
output files are copied out before the container is removed.

Every container carries labels (:mod:`~wmrl_env.sandboxes.docker.engine`);
:func:`~wmrl_env.sandboxes.docker.engine.cleanup_leaked_containers` removes the ones whose
owner is gone, and each sandbox removes its own on close, at interpreter exit and on
Ctrl-C. A container also removes itself once its sleeping first process ends,
``timeout + 10 min`` after it started.

With ``warm=True`` each worker keeps one long-lived container that forks a fresh process
per job instead (:mod:`~wmrl_env.sandboxes.docker.warm`): the same container limits, the
local warm pool's per-job isolation, a fraction of the overhead.

Example (needs a Docker engine and ``wmrl build-image``)::

    with DockerSandbox(timeout_s=10, memory_mb=512) as sandbox:
        [result] = sandbox.run([Job("print('hi')")])
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import shutil
import tarfile
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from wmrl_env.executors.base import ExecResult
from wmrl_env.sandboxes.docker.engine import (
    JOB_DIR,
    LABEL_JOB,
    LABEL_OWNER,
    LABEL_SANDBOX,
    SandboxImageMissingError,
    cleanup_leaked_containers,
    connect,
    oom_killed,
    owner,
)
from wmrl_env.sandboxes.docker.warm import IMPORT_ALLOWANCE_MB, WARM_TASKS, DockerWarmPool
from wmrl_env.sandboxes.image import default_image
from wmrl_env.sandboxes.job import Job
from wmrl_env.sandboxes.limits import SandboxLimits
from wmrl_env.sandboxes.outcome import ProcessOutcome
from wmrl_env.sandboxes.pool import Cancellation, JobPool, PooledSandbox
from wmrl_env.sandboxes.seccomp import job_denylist
from wmrl_env.sandboxes.warm import DEFAULT_PRELOAD
from wmrl_env.sandboxes.workdir import (
    check_inputs,
    job_environment,
    owned_temp_dir,
    remove_stale_temp_dirs,
)
from wmrl_env.utils.imports import require

logger = logging.getLogger(__name__)

__all__ = ["DockerSandbox"]

JOB_USER = "65534:65534"  # nobody
_SOURCE_PREFIX = "wmrl-docker-job-"  # host directories holding each job's main.py
_POLL_SECONDS = 0.1  # how often a running job's main process is checked

# runs inside the container: writes a tar of the regular output files to stdout and one
# line per refused file to stderr (argv: cap, "--", names...)
_COLLECTOR = """
import os, stat, sys, tarfile
cap, names = int(sys.argv[1]), sys.argv[3:]
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as archive:
    for name in names:
        try:
            info = os.lstat(name)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            print(f"{name} is not a regular file", file=sys.stderr)
        elif info.st_size > cap:
            print(f"{name} is {info.st_size} bytes, over the {cap}-byte cap", file=sys.stderr)
        else:
            archive.add(name, recursive=False)
"""


class DockerSandbox(PooledSandbox):
    """Run jobs in fresh, locked-down Docker containers.

    Args:
        timeout_s: wall-clock seconds per job (a job's own ``timeout_s`` overrides it).
        memory_mb: the container's memory (cgroup; no swap); exceeding it is
            ``out_of_memory``. The work directory's tmpfs counts against it.
        cpus: CPU share per container (``nano_cpus``).
        max_processes: processes and threads per container (``pids_limit``).
        max_output_bytes: stdout and stderr are each cut to their last this-many bytes.
        max_file_mb: the largest file a job may write (``ulimit -f``).
        workdir_mb: size of the ``/job`` tmpfs.
        image: the image (default: :func:`~wmrl_env.sandboxes.image.default_image`, built
            by ``wmrl build-image``); any image with ``python3``, ``sh`` and ``sleep``.
        gpus: ``None`` (no GPU), ``"all"`` or a number of GPUs to request (``device_requests``;
            needs the NVIDIA container toolkit).
        max_workers: containers running at once (default: the CPUs of this machine).
        env: extra environment variables for every job.
        base_url: the engine's address (default: ``DOCKER_HOST`` or the local socket).
        warm: keep one container per worker that forks a fresh process per job
            (:mod:`~wmrl_env.sandboxes.docker.warm`) instead of a new container per job.
            ``memory_mb`` is then on top of what the container holds once ``preload`` is
            imported, so a program has the room it would have in a cold job that imported
            them itself.
        preload: the modules a warm container imports once (missing ones are skipped).

    Raises:
        DockerUnavailableError: the engine cannot be reached.
        SandboxImageMissingError: the image is not there.
    """

    def __init__(
        self,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        *,
        cpus: float = 1.0,
        max_processes: int = 64,
        max_output_bytes: int = 1 << 20,
        max_file_mb: int = 256,
        workdir_mb: int = 256,
        image: str | None = None,
        gpus: int | str | None = None,
        max_workers: int | None = None,
        env: Mapping[str, str] | None = None,
        base_url: str | None = None,
        warm: bool = False,
        preload: Sequence[str] = DEFAULT_PRELOAD,
    ) -> None:
        if not cpus > 0:
            raise ValueError(f"cpus must be positive, got {cpus}")
        if not (isinstance(workdir_mb, int) and workdir_mb > 0):
            raise ValueError(f"workdir_mb must be a positive int, got {workdir_mb!r}")
        if gpus is not None and gpus != "all" and not (isinstance(gpus, int) and gpus > 0):
            raise ValueError(f"gpus must be None, 'all' or a positive int, got {gpus!r}")
        self.limits = SandboxLimits(
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            max_processes=max_processes,
            max_output_bytes=max_output_bytes,
            max_file_mb=max_file_mb,
        )
        self.cpus, self.workdir_mb, self.gpus = cpus, workdir_mb, gpus
        self._docker = require("docker", "DockerSandbox")
        workers = max_workers or os.cpu_count() or 1
        self._client = connect(base_url, max_pool_size=2 * workers + 4)
        self.image = image or default_image()
        try:
            self._client.images.get(self.image)
        except self._docker.errors.ImageNotFound:
            fix = "wmrl build-image" if image is None else f"docker build -t {self.image} ..."
            raise SandboxImageMissingError(
                f"the sandbox image {self.image} is not in the Docker engine; build it with `{fix}`"
            ) from None
        cleanup_leaked_containers(self._client)  # what killed owners left behind
        remove_stale_temp_dirs(_SOURCE_PREFIX)
        self._env = dict(env or {})
        self.sandbox_id = uuid.uuid4().hex
        self.warm = warm
        self._warm_pool = self._start_warm_pool(workers, preload) if warm else None
        self._pool = JobPool(self._run_one, workers, "wmrl-docker")
        self._finalizer = weakref.finalize(
            self, _shut_down, self._pool, self._client, self.sandbox_id, self._warm_pool
        )

    def _start_warm_pool(self, workers: int, preload: Sequence[str]) -> Any:
        options = self._container_options(
            memory_mb=self.limits.memory_mb + IMPORT_ALLOWANCE_MB,
            extra_tasks=WARM_TASKS,
            role="warm-server",
        )
        return DockerWarmPool(
            self._client,
            self.image,
            options,
            limits=self.limits,
            env=self._env,
            preload=preload,
            workers=workers,
            metadata=self.metadata,
        )

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "backend": "docker",
            "isolation": "docker",
            "network": "none",
            "filesystem": "private",
            "image": self.image,
            "memory_limit": "cgroup",
            "process_limit": f"pids_limit={self.limits.max_processes}",
            # a warm job installs the local jobs' denylist on top of Docker's profile
            "seccomp": "denylist" if self.warm and job_denylist() else "docker-default",
            "warm": self.warm,
        }

    def _run_one(self, job: Job, cancellation: Cancellation) -> ExecResult:
        if self._warm_pool is not None:
            return self._warm_pool.run(job, cancellation)
        start = time.monotonic()
        timeout_s = self.limits.timeout_for(job.timeout_s)
        outcome = ProcessOutcome.under(self.limits, timeout_s)
        # the root file system is read-only, so the engine refuses to copy files in: the
        # program is bind-mounted read-only from a host directory of its own instead
        source = owned_temp_dir(_SOURCE_PREFIX)
        program = os.path.join(source, "main.py")
        with open(program, "w", encoding="utf-8") as file:
            file.write(job.program)
        os.chmod(source, 0o755)
        os.chmod(program, 0o644)
        container = None

        def cancel() -> None:
            outcome.cancelled = True
            if container is not None:
                self._remove(container)

        try:
            container = self._create(job, timeout_s, program)
            with cancellation.kill_on_cancel(cancel):
                container.start()
                kept = self._exec(container, outcome, deadline=start + timeout_s)
                if kept:
                    self._collect(container, job, outcome)
                elif job.output_files and not outcome.cancelled:
                    outcome.output_problems.append(
                        "outputs lost: the container had to be killed (its process limit was "
                        "full or the engine failed)"
                    )
        except self._docker.errors.APIError:
            if not outcome.cancelled:  # else: the container was removed under the job
                raise
        finally:
            if container is not None:
                self._remove(container)
            shutil.rmtree(source, ignore_errors=True)
        outcome.seconds = time.monotonic() - start
        return outcome.to_result(job, {**self.metadata, "container": container.id[:12]})

    def _create(self, job: Job, timeout_s: float, program: str) -> Any:
        types = self._docker.types
        mounts = [types.Mount(f"{JOB_DIR}/main.py", program, type="bind", read_only=True)]
        mounts += [
            types.Mount(f"{JOB_DIR}/inputs/{name}", path, type="bind", read_only=True)
            for name, path in check_inputs(job.inputs).items()
        ]
        uid = JOB_USER.split(":")[0]
        options = self._container_options(
            memory_mb=self.limits.memory_mb, extra_tasks=0, role=job.job_id
        )
        return self._client.containers.create(
            self.image,
            command=["sleep", str(math.ceil(timeout_s) + 600)],
            user=JOB_USER,
            working_dir=JOB_DIR,
            # the work directory is the only writable place, as in the local sandbox
            tmpfs={JOB_DIR: f"size={self.workdir_mb}m,uid={uid},gid={uid}"},
            mounts=mounts,
            auto_remove=True,
            **options,
        )

    def _container_options(self, *, memory_mb: int, extra_tasks: int, role: str) -> dict:
        """What every container of this sandbox gets: no network, a read-only root, memory
        without swap, a CPU share, a process limit (``extra_tasks`` above the job's), the
        job's rlimits, no capability, no new privileges, the GPUs asked for, and the labels
        that find it again (``role``: the job's id, or what the container is for)."""
        types = self._docker.types
        file_bytes = self.limits.max_file_mb << 20
        ulimits = [
            types.Ulimit(name="fsize", soft=file_bytes, hard=file_bytes),
            types.Ulimit(
                name="nofile", soft=self.limits.max_open_files, hard=self.limits.max_open_files
            ),
            types.Ulimit(name="core", soft=0, hard=0),
        ]
        device_requests = None
        if self.gpus is not None:
            count = -1 if self.gpus == "all" else int(self.gpus)
            device_requests = [types.DeviceRequest(count=count, capabilities=[["gpu"]])]
        memory = f"{memory_mb}m"
        return {
            "network_mode": "none",
            "read_only": True,
            "mem_limit": memory,
            "memswap_limit": memory,
            "nano_cpus": int(self.cpus * 1e9),
            "pids_limit": self.limits.max_processes + extra_tasks,
            "ulimits": ulimits,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "device_requests": device_requests,
            "labels": {LABEL_JOB: role, LABEL_OWNER: owner(), LABEL_SANDBOX: self.sandbox_id},
            "hostname": "sandbox",
        }

    def _exec(self, container: Any, outcome: ProcessOutcome, deadline: float) -> bool:
        """Run ``python3 main.py``, pump its output, stop it at the deadline and kill what it
        leaves behind. False when the whole container had to be killed (outputs lost)."""
        api, errors = self._client.api, self._docker.errors
        exec_id = api.exec_create(
            container.id,
            ["sh", "-c", "mkdir -p .tmp inputs && exec python3 main.py"],
            user=JOB_USER,
            workdir=JOB_DIR,
            environment=job_environment(JOB_DIR, "/usr/bin", self._env),
        )["Id"]
        started = time.time()
        stream = api.exec_start(exec_id, stream=True, demux=True)
        finished = threading.Event()
        state: dict[str, Any] = {"kept": True, "exit_code": None}

        def stop_leftovers() -> None:
            state["kept"] = self._kill_processes(container) and state["kept"]

        def watch() -> None:  # the stream stays open while a leftover process holds it
            try:
                while not finished.wait(_POLL_SECONDS):
                    if time.monotonic() > deadline:
                        outcome.timed_out = True
                    else:
                        info = api.exec_inspect(exec_id)
                        if info["Running"]:
                            continue
                        state["exit_code"] = info["ExitCode"]
                    stop_leftovers()
                    return
            except Exception:  # the engine failed us: end the job rather than hang on it
                logger.exception("watching job in container %s failed", container.id[:12])
                state["kept"] = False
                with contextlib.suppress(Exception):
                    container.kill()

        watcher = threading.Thread(target=watch, name="wmrl-docker-watch", daemon=True)
        watcher.start()
        try:
            for stdout, stderr in stream:
                if stdout:
                    outcome.stdout.write(stdout)
                if stderr:
                    outcome.stderr.write(stderr)
        finally:
            finished.set()
            watcher.join()
        if outcome.cancelled:
            return False
        if state["exit_code"] is None:
            with contextlib.suppress(errors.APIError):
                state["exit_code"] = api.exec_inspect(exec_id)["ExitCode"]
        stop_leftovers()  # a background process the main one left behind
        code = state["exit_code"]
        if code is None or code > 128:  # killed: docker reports 128 + the signal
            outcome.signal = 9 if code is None else code - 128
        else:
            outcome.exit_code = code
        if outcome.signal == 9 and not outcome.timed_out:
            outcome.oom_killed = oom_killed(self._client, container.id, since=started)
        return bool(state["kept"])

    def _kill_processes(self, container: Any) -> bool:
        """SIGKILL every process of the job's user but the container's first (``kill -1``
        spares PID 1 and the caller). When that cannot even start (a fork bomb filled the
        process limit), kill the whole container and return False."""
        try:
            command = ["sh", "-c", "kill -9 -1 2>/dev/null; exit 0"]  # "none left" is fine
            exit_code, _ = container.exec_run(command, user=JOB_USER)
        except self._docker.errors.APIError:
            exit_code = None
        if exit_code == 0:
            return True
        with contextlib.suppress(self._docker.errors.APIError):
            container.kill()
        return False

    def _collect(self, container: Any, job: Job, outcome: ProcessOutcome) -> None:
        """Copy the declared output files out (regular files only, within the size cap).

        The engine's archive API does not see tmpfs mounts, so a collector runs in the
        container, as the job's user, with the image's Python in isolated mode (``-I``:
        nothing from the work directory is imported) once every job process is dead.
        """
        if not job.output_files:
            return
        command = ["python3", "-I", "-c", _COLLECTOR, str(self.limits.max_collect_bytes)]
        exit_code, (archive_bytes, problems) = container.exec_run(
            [*command, "--", *job.output_files], user=JOB_USER, workdir=JOB_DIR, demux=True
        )
        if exit_code != 0:
            raise RuntimeError(f"collecting outputs failed: {(problems or b'').decode()[-500:]}")
        outcome.output_problems += (problems or b"").decode().splitlines()
        with tarfile.open(fileobj=io.BytesIO(archive_bytes or b""), mode="r") as archive:
            for member in archive:
                outcome.outputs[member.name] = archive.extractfile(member).read()

    def _remove(self, container: Any) -> None:
        with contextlib.suppress(self._docker.errors.NotFound, self._docker.errors.APIError):
            container.remove(force=True)


def _shut_down(pool: JobPool, client: Any, sandbox_id: str, warm_pool: Any) -> None:
    pool.close()
    if warm_pool is not None:
        warm_pool.close()
    with contextlib.suppress(Exception):  # the engine may be gone at interpreter exit
        cleanup_leaked_containers(client, sandbox_id=sandbox_id)
    client.close()
