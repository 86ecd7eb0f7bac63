"""Distribute jobs to Ray workers, each running its job in a local or Docker sandbox (extra
``ray``), for anchors that outgrow one machine.

Every job becomes one Ray task that asks for ``num_cpus_per_job`` CPUs; Ray places it on a
node with room, where a fresh inner sandbox (``LocalSandbox`` or ``DockerSandbox``, or any
executor a factory returns) runs it. The job's scorer stays on the driver: only the program,
its input paths and the names of its output files travel, and the outputs come back to be
scored where the answers are.

On a cluster, every node needs wmrl-env (and bubblewrap, or Docker and the sandbox image),
and the jobs' input paths must exist on every node (a shared file system).

Example (needs ``pip install 'wmrl-env[ray]'``)::

    import ray
    ray.init(address="auto")                    # or ray.init(num_cpus=2) on one machine
    with RayExecutor(inner="local", inner_kwargs={"timeout_s": 30}) as executor:
        results = executor.run(jobs)
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from wmrl_env.executors.base import BaseExecutor, ExecResult, ExecStatus, Executor
from wmrl_env.sandboxes.job import Job
from wmrl_env.sandboxes.scoring import apply_scorer
from wmrl_env.sandboxes.workdir import check_jobs
from wmrl_env.utils.imports import require

__all__ = ["RayExecutor"]

logger = logging.getLogger(__name__)

ExecutorFactory = Callable[[], Executor]


def _inner_factory(inner: str | ExecutorFactory, kwargs: Mapping[str, Any]) -> ExecutorFactory:
    """A picklable callable that builds the sandbox a worker runs its job in."""
    if callable(inner):
        return functools.partial(inner, **kwargs) if kwargs else inner
    if inner == "local":
        from wmrl_env.sandboxes.local import LocalSandbox

        return functools.partial(LocalSandbox, **{"max_workers": 1, **kwargs})
    if inner == "docker":
        from wmrl_env.sandboxes.docker.sandbox import DockerSandbox

        return functools.partial(DockerSandbox, **{"max_workers": 1, **kwargs})
    raise ValueError(f"inner must be 'local', 'docker' or a callable, got {inner!r}")


def _run_on_worker(factory: ExecutorFactory, job: Job) -> ExecResult:
    """Runs inside a Ray worker: one job in a fresh inner sandbox."""
    import ray

    with factory() as executor:
        [result] = executor.run([job])
    node = ray.get_runtime_context().get_node_id()
    return dataclasses.replace(result, metadata={**result.metadata, "ray_node": node})


_KILLED_AT_CLOSE = "the executor was closed while the job ran; it was killed"


class RayExecutor(BaseExecutor[Job]):
    """Run each job as a Ray task in an inner sandbox on whichever node has room.

    Args:
        inner: ``"local"`` (:class:`~wmrl_env.sandboxes.local.LocalSandbox`), ``"docker"``
            (:class:`~wmrl_env.sandboxes.docker.sandbox.DockerSandbox`) or a picklable
            callable returning an executor.
        inner_kwargs: arguments of the inner sandbox (``timeout_s``, ``memory_mb``, ...).
        num_cpus_per_job: CPUs Ray reserves for each job (its scheduling unit).
        address: the cluster to join when Ray is not initialized yet (``"auto"``, a
            ``ray://`` address, or ``None`` to start a local instance).
        init_kwargs: more arguments for ``ray.init`` when this executor starts Ray; it then
            shuts Ray down on close.
    """

    def __init__(
        self,
        inner: str | ExecutorFactory = "local",
        *,
        inner_kwargs: Mapping[str, Any] | None = None,
        num_cpus_per_job: float = 1.0,
        address: str | None = None,
        init_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not num_cpus_per_job > 0:
            raise ValueError(f"num_cpus_per_job must be positive, got {num_cpus_per_job}")
        self._factory = _inner_factory(inner, dict(inner_kwargs or {}))
        self._ray = require("ray", "RayExecutor")
        self._owns_ray = not self._ray.is_initialized()
        if self._owns_ray:
            self._ray.init(address=address, **dict(init_kwargs or {}))
        self._remote = self._ray.remote(_run_on_worker).options(
            num_cpus=num_cpus_per_job, max_retries=0
        )
        self._docker_inside = inner == "docker"
        self._lock = threading.Lock()
        self._running: dict[Any, Future[ExecResult]] = {}  # ObjectRef -> the job's future
        self._closing = False

    def _submit(self, jobs: list[Job]) -> list[Future[ExecResult]]:
        check_jobs(jobs, type(self).__name__)
        return [self._start(job) for job in jobs]

    def _start(self, job: Job) -> Future[ExecResult]:
        outcome: Future[ExecResult] = Future()
        outcome.set_running_or_notify_cancel()
        ref = self._remote.remote(self._factory, dataclasses.replace(job, scorer=None))
        with self._lock:
            self._running[ref] = outcome

        def resolve(done: Future[ExecResult]) -> None:
            with self._lock:
                self._running.pop(ref, None)
            outcome.set_result(self._score(job, done))

        ref.future().add_done_callback(resolve)
        return outcome

    def _score(self, job: Job, done: Future[ExecResult]) -> ExecResult:
        try:
            result = done.result()
        except self._ray.exceptions.TaskCancelledError:
            return ExecResult(job.job_id, ExecStatus.ERROR, message=_KILLED_AT_CLOSE)
        except Exception as error:  # a worker or node died: the job's fate is unknown
            logger.warning("Ray task for job %s failed: %r", job.job_id, error)
            return ExecResult(
                job.job_id, ExecStatus.ERROR, message=f"the Ray task failed: {error!r}"[:2000]
            )
        if self._closing and result.status is ExecStatus.CRASHED:
            # the kill reached the program before Ray marked the task cancelled
            return ExecResult(job.job_id, ExecStatus.ERROR, message=_KILLED_AT_CLOSE)
        return apply_scorer(result, job.scorer)

    def _close(self) -> None:
        with self._lock:
            self._closing = True
            running = dict(self._running)
        for ref in running:  # force: kill the worker process; its sandbox dies with it
            self._ray.cancel(ref, force=True)
        for outcome in running.values():
            outcome.result(timeout=120)
        if running and self._docker_inside:  # containers whose worker was killed
            from wmrl_env.sandboxes.docker.engine import cleanup_leaked_containers

            cleanup_leaked_containers()
        if self._owns_ray:
            self._ray.shutdown()
