"""``GymEnvExecutor``: real execution in gymnasium envs, in-process or in worker processes.

The executor the wrappers use to pay for real steps. A job (:class:`EnvJob`) says how an
episode starts (seed and options, or an exact snapshot) and which actions to play; the result's
``score`` is the sum of the rewards, and ``metadata`` carries the observations, per-step
rewards, ``terminated``/``truncated`` and the env's ``info``. Jobs with a ``slot`` keep their
env between jobs, so a multi-step episode can be played one step per job.

Backends:

* ``"inline"``: in the caller's thread, one job after the other (debugging, trivial envs).
* ``"thread"``: a thread pool; suits envs that wait on something else (a sandboxed program,
  a subprocess, a remote simulator), since they release the GIL while waiting.
* ``"process"``: worker processes; suits CPU-bound simulators (MuJoCo). Only this backend can
  enforce ``timeout_s``: it kills the worker, which then restarts.

Example:
    >>> import gymnasium as gym
    >>> with GymEnvExecutor(lambda: gym.make("CartPole-v1"), backend="thread") as executor:
    ...     results = executor.run([EnvJob(actions=(0, 0, 0), seed=s) for s in range(3)])
    >>> [r.score for r in results], [r.metadata["steps"] for r in results]
    ([3.0, 3.0, 3.0], [3, 3, 3])
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Literal

from wmrl_env.env_executors.play import EnvDescription, EnvFactory, EnvJob
from wmrl_env.env_executors.pool import EnvPool
from wmrl_env.env_executors.workers import ProcessWorker
from wmrl_env.executors.base import BaseExecutor, ExecResult

__all__ = ["BACKENDS", "EnvDescription", "EnvJob", "GymEnvExecutor"]

Backend = Literal["inline", "thread", "process"]
BACKENDS: tuple[str, ...] = ("inline", "thread", "process")


class GymEnvExecutor(BaseExecutor[EnvJob]):
    """Plays :class:`EnvJob` s in real gymnasium envs built by ``env_fn``.

    Args:
        env_fn: a callable returning a fresh ``gymnasium.Env`` (e.g. ``lambda: gym.make(...)``);
            it is called lazily, once per env the backend needs. For ``"process"`` it must be
            picklable with cloudpickle (lambdas and closures are).
        backend: ``"inline"``, ``"thread"`` or ``"process"`` (see the module docstring).
        num_workers: threads or processes; default ``min(32, cpu_count + 4)`` threads or
            ``cpu_count`` processes.
        timeout_s: default per-job wall-clock limit (process backend only).
        start_method: multiprocessing start method of the process backend; default
            ``"forkserver"`` (fast worker starts) where available, else ``"spawn"``.
        max_envs: most real envs alive at once (inline and thread backends: in all; process
            backend: in each worker process); default ``None``: as many as the jobs in flight
            need. The envs live until :meth:`close` and serve job after job (see
            :class:`~wmrl_env.env_executors.pool.EnvPool`): an expensive env (a LIBERO worker)
            starts once, not once per round.
    """

    def __init__(
        self,
        env_fn: EnvFactory,
        backend: Backend = "thread",
        num_workers: int | None = None,
        timeout_s: float | None = None,
        start_method: str | None = None,
        max_envs: int | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if not callable(env_fn):
            raise TypeError(f"env_fn must be a callable returning a gymnasium.Env, got {env_fn!r}")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if max_envs is not None and max_envs < 1:
            raise ValueError(f"max_envs must be >= 1, got {max_envs}")
        if timeout_s is not None and backend != "process":
            raise ValueError(
                "timeout_s can only be enforced with backend='process' (a thread cannot be "
                "stopped); give the env its own timeout instead"
            )
        self.env_fn = env_fn
        self.backend = backend
        self.timeout_s = timeout_s
        cpus = os.cpu_count() or 1
        self._pool: EnvPool | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._workers: list[ProcessWorker] = []
        self._round_robin = itertools.count()
        if backend == "process":
            self.num_workers = num_workers or cpus
            self._workers = [
                ProcessWorker(env_fn, start_method, name=f"wmrl-env-worker-{i}", max_envs=max_envs)
                for i in range(self.num_workers)
            ]
        else:
            self._pool = EnvPool(env_fn, max_envs)
            self.num_workers = 1 if backend == "inline" else num_workers or min(32, cpus + 4)
            if backend == "thread":
                self._threads = ThreadPoolExecutor(self.num_workers, thread_name_prefix="wmrl-env")

    def describe(self) -> EnvDescription:
        """The env's spaces, metadata, episode limit and snapshot support (builds one env)."""
        if self._pool is not None:
            return self._pool.describe()
        return self._workers[0].describe()

    def end_episodes(self) -> None:
        """The episodes in every slot are over (a round has ended): their envs stay alive and
        serve the next jobs, group starts included, instead of new envs being built."""
        if self._pool is not None:
            self._pool.end_episodes()
        for worker in self._workers:
            worker.end_episodes()

    def _submit(self, jobs: list[EnvJob]) -> list[Future[ExecResult]]:
        for job in jobs:
            if not isinstance(job, EnvJob):
                raise TypeError(f"GymEnvExecutor runs EnvJob, got {type(job).__name__}")
            if job.timeout_s is not None and self.backend != "process":
                raise ValueError("EnvJob.timeout_s can only be enforced with backend='process'")
        if self._workers:
            return [self._worker_for(job).submit(job, self._timeout(job)) for job in jobs]
        assert self._pool is not None
        if self._threads is not None:
            return [self._threads.submit(self._pool.run, job) for job in jobs]
        return [_done(self._pool.run(job)) for job in jobs]

    def _worker_for(self, job: EnvJob) -> ProcessWorker:
        index = job.slot if job.slot is not None else next(self._round_robin)
        return self._workers[index % len(self._workers)]

    def _timeout(self, job: EnvJob) -> float | None:
        return job.timeout_s if job.timeout_s is not None else self.timeout_s

    def _close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=False)
        for worker in self._workers:
            worker.close()
        if self._pool is not None:
            self._pool.close()


def _done(result: ExecResult) -> Future[ExecResult]:
    future: Future[ExecResult] = Future()
    future.set_result(result)
    return future
