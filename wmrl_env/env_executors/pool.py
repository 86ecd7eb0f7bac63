"""The live real envs of a backend: built on demand, reused job after job, at most ``max_envs``.

An env can be expensive to start (a LIBERO worker: its own interpreter, seconds to minutes and
about 1.3 GB), so the pool keeps every env it builds alive until :meth:`EnvPool.close` and
hands it to job after job, round after round: a group start (``reset`` plus an exact
``restore_snapshot``) costs a reset, not a start-up.

A *slot* is an episode played over several jobs (one job per step); it keeps its env while the
episode is in progress. Any other job takes, in this order: an idle env with no episode in
progress; a new env, while fewer than ``max_envs`` are alive; the least recently used idle env
that holds another slot's episode, *parking* that episode (``get_snapshot``; the slot's next
job restores it into whichever env it gets, bit for bit, without a reset); else it waits for a
busy env. Parking is exact for envs whose snapshot holds the whole episode state (LIBERO's and
robosuite's count their own horizon); a wrapper's counter (``TimeLimit``) is not in it. An env
whose job failed (it raised, its worker died) is closed, and a new one is built when one is
next needed: the failure is that job's result, never lost.

Example:
    >>> import gymnasium as gym
    >>> pool = EnvPool(lambda: gym.make("CartPole-v1"), max_envs=2)
    >>> [pool.run(EnvJob(actions=(0, 1), seed=s)).score for s in range(3)]
    [2.0, 2.0, 2.0]
    >>> pool.run(EnvJob(actions=(0,), seed=0, slot=0)).ok  # an episode over several jobs
    True
    >>> pool.run(EnvJob(actions=(1, 1), slot=0, reset=False)).metadata["steps"]
    2
    >>> pool.num_live  # five jobs, one env
    1
    >>> pool.close()
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from wmrl_env.env_executors.play import (
    EnvDescription,
    EnvFactory,
    EnvJob,
    describe,
    env_attribute,
    no_episode_message,
    play,
    supports_snapshots,
)
from wmrl_env.executors.base import ExecResult, ExecStatus

__all__ = ["EnvPool"]


@dataclass(eq=False)
class _Live:
    """A live env (``None`` while it is being built): the slot whose episode it holds, if
    any, whether a job holds it, and when it was last handed out."""

    env: gym.Env | None = None
    slot: int | None = None
    busy: bool = True
    used: int = 0
    was_reset: bool = False


class _Unservable(Exception):
    """A job the pool cannot give an env to; its message is the job's error."""


class EnvPool:
    """Real envs built by ``env_fn`` on demand and reused; see the module docstring.

    Thread-safe: jobs on different slots (and one-off jobs) run concurrently, jobs on one slot
    one at a time.

    Args:
        env_fn: builds one env.
        max_envs: most envs alive at once (``None``: as many as the jobs in flight need).
    """

    def __init__(self, env_fn: EnvFactory, max_envs: int | None = None) -> None:
        if not callable(env_fn):
            raise TypeError(f"env_fn must be a callable returning a gymnasium.Env, got {env_fn!r}")
        if max_envs is not None and max_envs < 1:
            raise ValueError(f"max_envs must be >= 1, got {max_envs}")
        self._env_fn = env_fn
        self.max_envs = max_envs
        self._live: list[_Live] = []
        self._parked: dict[int, Any] = {}  # slot -> snapshot of its episode, moved out
        self._clock = itertools.count()
        self._changed = threading.Condition()

    @property
    def num_live(self) -> int:
        """How many envs are alive (or being built)."""
        with self._changed:
            return len(self._live)

    def describe(self) -> EnvDescription:
        live, _, _ = self._acquire(EnvJob())
        try:
            return describe(live.env)
        finally:
            self._release(live, in_episode=False, ok=True)

    def run(self, job: EnvJob) -> ExecResult:
        """Play ``job``; failures (a factory that raises included) come back as results."""
        try:
            live, in_episode, parked = self._acquire(job)
        except _Unservable as error:
            return _error(job, str(error))
        except Exception as error:
            return _error(job, f"env_fn raised {type(error).__name__}: {error}")
        ok = False
        try:
            if parked is not None:
                try:
                    if not live.was_reset:  # a new env: reset once before restoring into it
                        live.env.reset()
                    env_attribute(live.env, "restore_snapshot")(parked)
                except Exception as error:
                    message = f"restoring slot {job.slot}'s parked episode raised {error!r}"
                    return _error(job, message)
                in_episode = True
            result, in_episode = play(live.env, job, in_episode)
            live.was_reset = True
            ok = result.ok
            return result
        finally:
            self._release(live, in_episode and ok, ok)

    def _acquire(self, job: EnvJob) -> tuple[_Live, bool, Any]:
        """An env for ``job`` (marked busy), whether it holds the job's episode, and the parked
        snapshot the job must resume first. Builds the env when the pool may grow."""
        with self._changed:
            while True:
                own = next(
                    (x for x in self._live if x.slot is not None and x.slot == job.slot), None
                )
                if own is not None:
                    if not own.busy:
                        return self._hand_out(own, job), True, None
                    self._changed.wait()
                    continue
                if job.slot is not None and not job.reset and job.slot not in self._parked:
                    raise _Unservable(no_episode_message(job.slot))
                live = self._free_env(job)
                if live is not None:
                    parked = None if job.reset else self._parked.pop(job.slot, None)
                    if job.reset and job.slot is not None:
                        self._parked.pop(job.slot, None)  # a new episode replaces a parked one
                    break
                self._changed.wait()
        if live.env is None:
            try:
                live.env = _build(self._env_fn)
            except BaseException:
                with self._changed:
                    self._live.remove(live)
                    if parked is not None:
                        self._parked[job.slot] = parked
                    self._changed.notify_all()
                raise
        return live, False, parked

    def _free_env(self, job: EnvJob) -> _Live | None:
        """Under the lock: an idle env with no episode, a new one, or a parked one's; else None."""
        idle = [x for x in self._live if not x.busy]
        free = [x for x in idle if x.slot is None]
        if free:
            return self._hand_out(free[0], job)
        if self.max_envs is None or len(self._live) < self.max_envs:
            live = _Live()  # built by the caller, outside the lock
            self._live.append(live)
            return self._hand_out(live, job)
        if idle:
            victim = min(idle, key=lambda x: x.used)
            if victim.env is not None and supports_snapshots(victim.env):
                return self._hand_out(self._park(victim), job)
            if len(idle) == len(self._live):  # nothing busy: nothing will come free
                raise _Unservable(
                    f"all {len(self._live)} envs (max_envs={self.max_envs}) hold episodes in "
                    "progress and the env has no get_snapshot/restore_snapshot to park one: "
                    "raise max_envs to the number of episodes played at once"
                )
        return None

    def _hand_out(self, live: _Live, job: EnvJob) -> _Live:
        live.busy, live.used, live.slot = True, next(self._clock), job.slot
        return live

    def _park(self, live: _Live) -> _Live:
        """Under the lock: move the episode in ``live`` out (a snapshot), freeing the env."""
        assert live.env is not None and live.slot is not None
        try:
            self._parked[live.slot] = env_attribute(live.env, "get_snapshot")()
        except Exception as error:
            self._retire(live)
            raise _Unservable(
                f"parking slot {live.slot}'s episode to free its env failed "
                f"({type(error).__name__}: {error}); that episode is lost"
            ) from None
        live.slot = None
        return live

    def _release(self, live: _Live, in_episode: bool, ok: bool) -> None:
        with self._changed:
            live.busy = False
            if not in_episode:
                live.slot = None
            if not ok:
                self._retire(live)
            self._changed.notify_all()

    def _retire(self, live: _Live) -> None:
        # an env whose state is unknown (it raised, its worker died) is never reused
        if live in self._live:
            self._live.remove(live)
        if live.env is not None:
            _close_quietly(live.env)

    def end_episodes(self) -> None:
        """Every slot's episode is over (a round has ended): its env serves any job now, and
        parked episodes are dropped. The envs stay alive."""
        with self._changed:
            for live in self._live:
                if not live.busy:
                    live.slot = None
            self._parked.clear()
            self._changed.notify_all()

    def close(self) -> None:
        """Close every env. Idempotent."""
        with self._changed:
            live, self._live, self._parked = self._live, [], {}
        for item in live:
            if item.env is not None:
                _close_quietly(item.env)


def _build(env_fn: EnvFactory) -> gym.Env:
    env = env_fn()
    if not isinstance(env, gym.Env):
        raise TypeError(f"env_fn must return a gymnasium.Env, got {type(env).__name__}")
    return env


def _error(job: EnvJob, message: str) -> ExecResult:
    return ExecResult(job_id=job.job_id, status=ExecStatus.ERROR, message=message)


def _close_quietly(env: gym.Env) -> None:
    # closing a broken env must not hide the result that broke it
    with contextlib.suppress(Exception):
        env.close()
