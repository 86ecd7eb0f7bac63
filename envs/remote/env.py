"""A gymnasium environment that lives in another Python interpreter."""

from __future__ import annotations

import builtins
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from wmrl_env.env_executors.child import ChildProcess, WorkerDiedError
from wmrl_env.envs.remote.protocol import FORWARDED_METHODS, decode, encode, space_from_spec

__all__ = ["RemoteEnvError", "SubprocessEnv", "WorkerDiedError", "step_all"]

# exception types re-raised as themselves when the worker reports them
_PASS_THROUGH = (
    AttributeError,
    IndexError,
    KeyError,
    NotImplementedError,
    RuntimeError,
    TypeError,
    ValueError,
)
_SNAPSHOT_METHODS = ("get_snapshot", "restore_snapshot")


class RemoteEnvError(RuntimeError):
    """The environment in the worker raised an exception that is not a builtin one."""


class SubprocessEnv(gym.Env):
    """Run ``entry_point(**kwargs)`` in a worker process (any Python interpreter) and use it here.

    The worker may run a different interpreter with conflicting packages: LIBERO needs
    robosuite 1.4, the rest of wmrl-env robosuite 1.5, so LIBERO runs in its own virtual
    environment and is driven from the main one through this class. The worker interpreter
    needs ``wmrl-env`` (core) and whatever the environment needs.

    ``reset``, ``step``, ``render``, ``close`` and, exactly when the remote environment has
    them, ``get_snapshot`` / ``restore_snapshot`` are forwarded; :meth:`call` reaches any other
    method or attribute. ``step_async`` / ``step_wait`` (and ``call_async`` / ``call_wait``)
    let several workers run at once. Arrays cross the pipe as bytes (see
    :mod:`~wmrl_env.envs.remote.protocol`), so NumPy versions may differ between the two
    sides.

    Errors: a builtin exception in the worker (``ValueError``, ``TypeError``, ...) is raised
    here as the same type with the worker's traceback appended; any other as
    :class:`RemoteEnvError`. If the worker process dies, :class:`WorkerDiedError` says how and
    shows the end of its output. A request that takes longer than ``timeout`` seconds kills
    the worker and raises ``TimeoutError``. The worker's stdout and stderr go to a log file
    (:attr:`log_path`), so simulator chatter stays out of the parent's output.

    Args:
        entry_point: ``"package.module:Factory"`` importable in the worker interpreter.
        kwargs: keyword arguments for the factory (plain data and arrays only).
        python: the worker's interpreter; default: this one.
        env_vars: extra environment variables for the worker (e.g. ``MUJOCO_GL``).
        start_timeout: seconds allowed for the worker to import and build the environment.
        timeout: seconds allowed for any later request (``None``: wait forever).

    Example:
        >>> env = SubprocessEnv("gymnasium.envs.classic_control:CartPoleEnv")
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape, env.action_space
        ((4,), Discrete(2))
        >>> env.close()
    """

    def __init__(
        self,
        entry_point: str,
        kwargs: Mapping[str, Any] | None = None,
        python: str | os.PathLike[str] | None = None,
        env_vars: Mapping[str, str] | None = None,
        start_timeout: float = 600.0,
        timeout: float | None = 600.0,
    ) -> None:
        python = str(python or sys.executable)
        if not Path(python).is_file():
            raise FileNotFoundError(f"worker interpreter {python!r} does not exist")
        for name, value in (("start_timeout", start_timeout), ("timeout", timeout)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.entry_point = entry_point
        self.python = python
        self.timeout = timeout
        self._closed = False
        self._pending: str | None = None
        self._child = ChildProcess.run_module(
            python,
            "wmrl_env.envs.remote.worker",
            name=f"the worker running {entry_point} ({python})",
            env_vars=env_vars,
        )
        try:
            self._child.send((entry_point, encode(dict(kwargs or {}))), what="starting")
            description = self._receive(start_timeout, what=f"building {entry_point}")
        except BaseException:
            self._child.stop()
            self._closed = True
            raise
        self.observation_space = space_from_spec(description["observation_space"])
        self.action_space = space_from_spec(description["action_space"])
        self.metadata = decode(description["metadata"])
        self.render_mode = description["render_mode"]
        self._remote_methods = frozenset(description["methods"])

    @property
    def log_path(self) -> str:
        """The file that holds the worker's stdout and stderr."""
        return str(self._child.log_path)

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self._child.pid

    def _receive(self, timeout: float | None, what: str) -> Any:
        try:
            reply = self._child.receive(timeout, what)
        except (TimeoutError, WorkerDiedError):
            self._closed = True  # the child is stopped
            raise
        if reply[0] == "ok":
            return reply[1]
        _, kind, message, remote_traceback = reply
        detail = f"{message}\n--- in the worker ({self.entry_point}) ---\n{remote_traceback}"
        exc_type = getattr(builtins, kind, None)
        if isinstance(exc_type, type) and issubclass(exc_type, _PASS_THROUGH):
            raise exc_type(detail)
        raise RemoteEnvError(f"{kind}: {detail}")

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Send a request (``name`` is a method of the remote env) without waiting."""
        if self._closed:
            raise RuntimeError(f"the SubprocessEnv running {self.entry_point} is closed")
        if self._pending is not None:
            raise RuntimeError(f"a {self._pending!r} request is still waiting for its answer")
        method, args = (name, args) if name in FORWARDED_METHODS else ("call", (name, *args))
        try:
            self._child.send((method, encode(args), encode(kwargs)), what=f"sending {name}")
        except WorkerDiedError:
            self._closed = True
            raise
        self._pending = name

    def call_wait(self, timeout: float | None = None) -> Any:
        """The answer to the last :meth:`call_async`."""
        if self._pending is None:
            raise RuntimeError("call_wait() without a pending call_async()")
        name, self._pending = self._pending, None
        return decode(self._receive(timeout or self.timeout, what=f"running {name}"))

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the remote env's method ``name`` (or read the attribute ``name``)."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return tuple(self.call("reset", seed=seed, options=options))

    def step_async(self, action: Any) -> None:
        self.call_async("step", action)

    def step_wait(self) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.call_wait()
        return obs, float(reward), bool(terminated), bool(truncated), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.step_async(action)
        return self.step_wait()

    def render(self) -> Any:
        return self.call("render")

    def __getattr__(self, name: str) -> Any:
        # get_snapshot / restore_snapshot exist here exactly when the remote env has them, so
        # hasattr() tells callers (WorldModelVectorEnv) whether exact group starts are possible
        if name in _SNAPSHOT_METHODS and name in self.__dict__.get("_remote_methods", ()):
            if name == "get_snapshot":
                return lambda: self.call("get_snapshot")
            return lambda snapshot: tuple(self.call("restore_snapshot", snapshot))
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def close(self, timeout: float = 60.0) -> None:
        """Close the remote environment and wait for the worker to exit (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._pending is None:  # the worker is listening: ask it to close the env
            self._child.stop(goodbye=("close", (), {}), timeout=timeout)
        else:
            self._child.stop()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"pid {self.pid}"
        return f"<SubprocessEnv {self.entry_point} ({state})>"


def step_all(envs: Sequence[SubprocessEnv], actions: Sequence[Any]) -> list[tuple]:
    """Step several worker environments at once; returns their 5-tuples in order.

    >>> envs = [SubprocessEnv("gymnasium.envs.classic_control:CartPoleEnv") for _ in range(2)]
    >>> _ = [env.reset(seed=0) for env in envs]
    >>> [len(result) for result in step_all(envs, [0, 1])]
    [5, 5]
    >>> for env in envs: env.close()
    """
    if len(envs) != len(actions):
        raise ValueError(f"{len(envs)} environments but {len(actions)} actions")
    for env, action in zip(envs, actions, strict=True):
        env.step_async(action)
    return [env.step_wait() for env in envs]
