"""Play one :class:`EnvJob` in a real gymnasium env.

This module holds what every backend of :class:`~wmrl_env.env_executors.gym_env.GymEnvExecutor`
shares: the job type and :func:`play` (reset or restore, then step the job's actions, turning
every failure into a result). The envs themselves live in an
:class:`~wmrl_env.env_executors.pool.EnvPool`.

Example:
    >>> import gymnasium as gym
    >>> env = gym.make("CartPole-v1")
    >>> result, running = play(env, EnvJob(actions=(0, 1), seed=3), in_episode=False)
    >>> result.ok, result.score, result.metadata["steps"], running
    (True, 2.0, 2, True)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

from wmrl_env.executors.base import ExecResult, ExecStatus, new_job_id

__all__ = [
    "REPORTED_SECONDS",
    "EnvDescription",
    "EnvJob",
    "SupportsSnapshots",
    "describe",
    "env_attribute",
    "no_episode_message",
    "play",
    "supports_snapshots",
]

REPORTED_SECONDS = "exec_seconds"
"""An env whose every step's ``info`` carries this key (seconds of real execution, e.g. a
sandboxed program's run or a replayed table's recorded time) is charged that instead of the
wall clock of its steps."""

EnvFactory = Callable[[], gym.Env]


@runtime_checkable
class SupportsSnapshots(Protocol):
    """An env whose exact state can be captured and restored: how every member of a GRPO
    group gets the same start (:class:`EnvJob`'s ``capture_snapshot`` and ``snapshot``).

    ``get_snapshot()`` returns the current state as plain data (it pickles and crosses
    processes). ``restore_snapshot(snapshot)`` puts the env in that state and returns
    ``(obs, info)`` like ``reset``, the observation being the one the env had when the snapshot
    was taken; stepping on replays the original continuation bit for bit. A snapshot that
    does not fit raises ``ValueError`` or ``TypeError`` and changes nothing.
    :class:`wmrl_env.testing.SnapshotContract` checks all of this for an env.
    """

    def get_snapshot(self) -> Any: ...

    def restore_snapshot(self, snapshot: Any) -> tuple[Any, dict[str, Any]]: ...


_SNAPSHOT_METHODS = ("get_snapshot", "restore_snapshot")  # SupportsSnapshots'


@dataclass(frozen=True)
class EnvJob:
    """A piece of an episode to play in a real env: how it starts, then which actions.

    Attributes:
        actions: actions to step, in order; play stops early when the episode ends.
        seed, options: passed to ``env.reset`` when the job starts an episode.
        snapshot: an exact start state; after ``reset(seed, options)`` the env's
            ``restore_snapshot(snapshot) -> (obs, info)`` puts it there (the reset first
            brings every wrapper, e.g. ``TimeLimit``, to a clean state).
        slot: a persistent env, kept between jobs so an episode can be played over several
            jobs; ``None`` takes any free env (one-off jobs).
        reset: ``False`` continues the episode in progress in ``slot`` instead of starting one.
        capture_snapshot: after the reset, return ``env.get_snapshot()`` (when the env has it)
            in ``metadata["snapshot"]``.
        snapshot_after: after the actions, while the episode goes on, return
            ``env.get_snapshot()`` (when the env has it) in ``metadata["end_snapshot"]``:
            the exact state the job left the episode in.
        timeout_s: wall-clock limit; enforced only by the process backend.
        job_id, tags: as for :class:`~wmrl_env.sandboxes.job.Job`.

    Example:
        >>> EnvJob(actions=[1, 0], seed=7).actions
        (1, 0)
        >>> EnvJob(actions=[1], reset=False)
        Traceback (most recent call last):
        ...
        ValueError: EnvJob(reset=False) continues an episode in a slot: give slot=...
    """

    actions: tuple[Any, ...] = ()
    seed: int | None = None
    options: Mapping[str, Any] | None = None
    snapshot: Any = None
    slot: int | None = None
    reset: bool = True
    capture_snapshot: bool = False
    snapshot_after: bool = False
    timeout_s: float | None = None
    job_id: str = field(default_factory=new_job_id)
    tags: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "actions", tuple(self.actions))
        if not self.reset and self.slot is None:
            raise ValueError("EnvJob(reset=False) continues an episode in a slot: give slot=...")
        if not self.reset and (self.snapshot is not None or self.seed is not None):
            raise ValueError("EnvJob(reset=False) cannot take a seed or snapshot")
        if self.slot is not None and self.slot < 0:
            raise ValueError(f"EnvJob.slot must be >= 0, got {self.slot}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"EnvJob.timeout_s must be positive, got {self.timeout_s}")


@dataclass(frozen=True)
class EnvDescription:
    """What a wrapper needs to know about the real env without holding one."""

    observation_space: gym.Space
    action_space: gym.Space
    metadata: dict[str, Any]
    max_episode_steps: int | None
    has_snapshots: bool


def describe(env: gym.Env) -> EnvDescription:
    spec = env.spec
    return EnvDescription(
        observation_space=env.observation_space,
        action_space=env.action_space,
        metadata=dict(env.metadata),
        max_episode_steps=spec.max_episode_steps if spec is not None else None,
        has_snapshots=supports_snapshots(env),
    )


def supports_snapshots(env: gym.Env) -> bool:
    """Whether ``env``, or an env it wraps, is :class:`SupportsSnapshots`.

    Example:
        >>> supports_snapshots(gym.make("CartPole-v1"))
        False
    """
    return all(callable(env_attribute(env, name)) for name in _SNAPSHOT_METHODS)


def env_attribute(env: gym.Env, name: str) -> Any:
    """``name`` of ``env`` or of the env it wraps (``None`` when none has it)."""
    try:
        return env.get_wrapper_attr(name)
    except AttributeError:
        return None


class _NonFinite(Exception):
    """A step returned a NaN or infinite reward; an invalid-output result."""


class _Misuse(Exception):
    """A job the env cannot play (no episode in its slot, no restore); an error result."""


def no_episode_message(slot: int | None) -> str:
    """The error of a job that continues (``reset=False``) a slot with no episode."""
    return (
        f"slot {slot} has no episode in progress (never started, ended, failed, or its worker "
        "restarted): start one with reset=True"
    )


def play(env: gym.Env, job: EnvJob, in_episode: bool) -> tuple[ExecResult, bool]:
    """Play ``job`` in ``env``; returns the result and whether an episode is still running.

    Never raises for a failing env: an exception in ``reset``/``step``/``restore_snapshot`` is an
    ``error`` result with the step it happened at (also when the env's worker process died:
    infrastructure, the outcome is unknown), a non-finite reward ``invalid_output``.
    The env must be discarded after an error (its state is unknown); the caller does that.
    """
    start = time.perf_counter()
    metadata: dict[str, Any] = {"slot": job.slot, "tags": dict(job.tags)}
    rewards: list[float] = []
    where = "reset"
    try:
        if job.reset:
            observation, info = env.reset(seed=job.seed, options=job.options)
            if job.capture_snapshot:
                get_snapshot = env_attribute(env, "get_snapshot")
                metadata["snapshot"] = get_snapshot() if callable(get_snapshot) else None
            if job.snapshot is not None:
                where = "restore_snapshot"
                restore = env_attribute(env, "restore_snapshot")
                if not callable(restore):
                    raise _Misuse("the job carries a snapshot but the env has no restore")
                observation, info = restore(job.snapshot)
            metadata["start_observation"] = observation
        elif not in_episode:
            raise _Misuse(no_episode_message(job.slot))
        else:
            observation, info = None, {}
        terminated = truncated = False
        reported: list[float] = []  # the real cost each step's info claims, if it does
        for index, action in enumerate(job.actions):
            where = f"step {index}"
            observation, reward, terminated, truncated, info = env.step(action)
            cost = info.get(REPORTED_SECONDS) if isinstance(info, dict) else None
            if isinstance(cost, (int, float)) and math.isfinite(cost) and cost >= 0:
                reported.append(float(cost))
            reward = float(reward)
            if not math.isfinite(reward):
                raise _NonFinite(f"{where} returned reward {reward}")
            rewards.append(reward)
            if terminated or truncated:
                break
        if job.snapshot_after and not (terminated or truncated):
            where = "get_snapshot"
            get_snapshot = env_attribute(env, "get_snapshot")
            metadata["end_snapshot"] = get_snapshot() if callable(get_snapshot) else None
    except _NonFinite as error:
        return _failed(job, ExecStatus.INVALID_OUTPUT, str(error), start, metadata, rewards), False
    except _Misuse as error:
        return _failed(job, ExecStatus.ERROR, str(error), start, metadata, rewards), False
    except Exception as error:  # a failing env is a result, never an exception
        message = f"{where} raised {type(error).__name__}: {error}"
        # an env that raises or a worker that died: infrastructure, the outcome is unknown
        return _failed(job, ExecStatus.ERROR, message, start, metadata, rewards), False
    metadata.update(
        observation=observation,
        info=info,
        rewards=tuple(rewards),
        steps=len(rewards),
        terminated=bool(terminated),
        truncated=bool(truncated),
    )
    seconds = time.perf_counter() - start
    # an env that reports its own execution cost (a sandboxed program, a replayed table) is
    # charged that; otherwise the wall clock of its steps
    charged = math.fsum(reported) if reported and len(reported) == len(rewards) else seconds
    result = ExecResult(
        job_id=job.job_id,
        status=ExecStatus.OK,
        score=math.fsum(rewards) if job.actions else math.nan,
        wall_seconds=seconds,
        exec_seconds=charged,
        metadata=metadata,
    )
    return result, not (terminated or truncated)


def _failed(
    job: EnvJob,
    status: ExecStatus,
    message: str,
    start: float,
    metadata: dict[str, Any],
    rewards: list[float],
) -> ExecResult:
    seconds = time.perf_counter() - start
    metadata.update(rewards=tuple(rewards), steps=len(rewards))
    return ExecResult(
        job_id=job.job_id,
        status=status,
        wall_seconds=seconds,
        exec_seconds=seconds,
        message=message,
        metadata=metadata,
    )
