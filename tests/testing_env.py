"""Fake envs and world models for the wrapper and executor tests, behaviour passed in.

Like gymnasium's ``tests/testing_env.py``: :class:`GenericTestEnv` takes its ``reset`` and
``step`` as functions, so a test states exactly the behaviour it relies on. The small concrete
tasks below (a contextual bandit, a text task, a point mass) count their real ``step`` calls in
a shared :class:`CallLog`, which is how the tests prove that only anchors reach the real env.
"""

from __future__ import annotations

import string
import threading
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wmrl_env.world_models.base import StepPrediction


class CallLog:
    """Thread-safe record of real calls: ``(kind, context, action)`` tuples."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[str, Any, Any]] = []

    def add(self, kind: str, context: Any = None, action: Any = None) -> None:
        with self._lock:
            self.calls.append((kind, context, action))

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for call in self.calls if call[0] == kind)

    def of(self, kind: str) -> list[tuple[str, Any, Any]]:
        with self._lock:
            return [call for call in self.calls if call[0] == kind]


def _default_reset(env: GenericTestEnv, seed: int | None, options: dict | None):
    return env.observation_space.sample(), {}


def _default_step(env: GenericTestEnv, action: Any):
    return env.observation_space.sample(), 0.0, True, False, {}


class GenericTestEnv(gym.Env):
    """An env whose ``reset``/``step`` behaviour is passed in (gymnasium's test pattern)."""

    def __init__(
        self,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        reset_func: Callable[..., tuple[Any, dict]] = _default_reset,
        step_func: Callable[..., tuple[Any, float, bool, bool, dict]] = _default_step,
    ) -> None:
        self.observation_space = observation_space or spaces.Box(0, 1, (1,), np.float32)
        self.action_space = action_space or spaces.Discrete(2)
        self._reset_func = reset_func
        self._step_func = step_func

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self._reset_func(self, seed, options)

    def step(self, action: Any):
        return self._step_func(self, action)


class BanditEnv(gym.Env):
    """One-step contextual bandit: context ``c`` drawn at reset, reward ``payoff[c, a] + noise``.

    The observation is the context id (``Discrete``); ``true_reward(c, a) = payoff[c, a]``.
    An action of ``fail_action`` makes ``step`` raise, like a sandbox that breaks.
    """

    def __init__(
        self,
        payoff: np.ndarray,
        noise: float = 0.0,
        log: CallLog | None = None,
        fail_action: int | None = None,
    ) -> None:
        self.payoff = np.asarray(payoff, dtype=np.float64)
        self.noise = noise
        self.log = log
        self.fail_action = fail_action
        n_contexts, n_actions = self.payoff.shape
        self.observation_space = spaces.Discrete(n_contexts)
        self.action_space = spaces.Discrete(n_actions)
        self._context = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._context = int(self.np_random.integers(self.payoff.shape[0]))
        if self.log is not None:
            self.log.add("reset", self._context)
        return self._context, {"context": self._context}

    def step(self, action: Any):
        action = int(action)
        if self.log is not None:
            self.log.add("step", self._context, action)
        if action == self.fail_action:
            raise RuntimeError(f"sandbox broke on action {action}")
        reward = self.payoff[self._context, action] + self.noise * self.np_random.normal()
        return self._context, float(reward), True, False, {"true_reward": 0.0}


class BanditWorldModel:
    """``predict(contexts, actions) = scale * payoff + bias`` with optional per-action bias."""

    def __init__(
        self,
        payoff: np.ndarray,
        scale: float = 1.0,
        bias: np.ndarray | float = 0.0,
        invalid_actions: Sequence[int] = (),
    ) -> None:
        self.payoff = np.asarray(payoff, dtype=np.float64)
        self.scale = scale
        self.bias = np.broadcast_to(np.asarray(bias, dtype=np.float64), self.payoff.shape)
        self.invalid_actions = set(invalid_actions)
        self.calls = 0

    def predict(self, contexts: Sequence[Any], actions: Sequence[Any]) -> np.ndarray:
        if len(contexts) != len(actions):
            raise ValueError("contexts and actions differ in length")
        self.calls += 1
        c = np.asarray(contexts, dtype=np.int64)
        a = np.asarray(actions, dtype=np.int64)
        scores = self.scale * self.payoff[c, a] + self.bias[c, a]
        return np.where(np.isin(a, list(self.invalid_actions)), np.nan, scores)


CHARSET = string.ascii_letters + " ?"
TASKS = ("reverse abc", "upper xyz", "double ab")
ANSWERS = {"reverse abc": "cba", "upper xyz": "XYZ", "double ab": "abab"}


class TextTaskEnv(gym.Env):
    """One-step text task: the observation is a task prompt, the action an answer string."""

    def __init__(self, log: CallLog | None = None) -> None:
        self.observation_space = spaces.Text(max_length=32, charset=CHARSET)
        self.action_space = spaces.Text(max_length=32, charset=CHARSET)
        self.log = log
        self._task = TASKS[0]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._task = TASKS[int(self.np_random.integers(len(TASKS)))]
        return self._task, {}

    def step(self, action: str):
        if self.log is not None:
            self.log.add("step", self._task, action)
        reward = float(action == ANSWERS[self._task])
        return self._task, reward, True, False, {}


class TextWorldModel:
    """Scores an answer by its length match with the right answer (a plausible, biased guess)."""

    def predict(self, contexts: Sequence[str], answers: Sequence[str]) -> np.ndarray:
        if len(contexts) != len(answers):
            raise ValueError("contexts and answers differ in length")
        return np.array(
            [
                0.5 * (len(a) == len(ANSWERS[c])) + 0.5 * (a == ANSWERS[c])
                for c, a in zip(contexts, answers, strict=True)
            ]
        )


class PointMassEnv(gym.Env):
    """Multi-step: ``x' = x + a`` in 1-D, reward ``-|x'|``, ends when ``|x'| < 0.1``.

    The start is drawn at reset from ``np_random``; with ``reproducible_reset=False`` it comes
    from an unseeded generator instead (like robosuite, whose reset(seed) does not reproduce).
    """

    def __init__(
        self,
        log: CallLog | None = None,
        fail_at_step: int | None = None,
        reproducible_reset: bool = True,
    ) -> None:
        self.observation_space = spaces.Box(-10.0, 10.0, (1,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.log = log
        self.fail_at_step = fail_at_step
        self.reproducible_reset = reproducible_reset
        self._x = np.zeros(1, dtype=np.float32)
        self._t = 0
        self._unseeded = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rng = self.np_random if self.reproducible_reset else self._unseeded
        self._x = rng.uniform(-3.0, 3.0, size=1).astype(np.float32)
        self._t = 0
        return self._x.copy(), {}

    def step(self, action: np.ndarray):
        if self.log is not None:
            self.log.add("step", float(self._x[0]), float(np.asarray(action).ravel()[0]))
        if self._t == self.fail_at_step:
            raise RuntimeError("simulator diverged")
        self._t += 1
        self._x = np.clip(self._x + np.asarray(action, dtype=np.float32), -10, 10)
        distance = float(abs(self._x[0]))
        return self._x.copy(), -distance, distance < 0.1, False, {}


class SnapshotPointMassEnv(PointMassEnv):
    """A point mass whose reset does not reproduce, but which offers exact snapshots."""

    def __init__(self, log: CallLog | None = None, fail_at_step: int | None = None) -> None:
        super().__init__(log, fail_at_step, reproducible_reset=False)

    def get_snapshot(self) -> dict[str, Any]:
        return {"x": self._x.copy(), "t": self._t}

    def restore_snapshot(self, snapshot: dict[str, Any]):
        if not (isinstance(snapshot, dict) and {"x", "t"} <= snapshot.keys()):
            raise ValueError(f"not a point-mass snapshot: {snapshot!r}")
        self._x, self._t = snapshot["x"].copy(), snapshot["t"]
        return self._x.copy(), {"restored": True}


class PointMassModel:
    """The point mass's exact dynamics, with ``reward_bias`` added (a biased world model)."""

    def __init__(self, reward_bias: float = 0.0, nan_below: float | None = None) -> None:
        self.reward_bias = reward_bias
        self.nan_below = nan_below
        self.calls = 0
        self.items = 0

    def predict_step(self, observations: np.ndarray, actions: np.ndarray) -> StepPrediction:
        if len(observations) != len(actions):
            raise ValueError("observations and actions differ in length")
        self.calls += 1
        self.items += len(observations)
        nxt = np.clip(observations + np.asarray(actions, dtype=np.float32), -10, 10)
        distance = np.abs(nxt[:, 0]).astype(np.float64)
        rewards = -distance + self.reward_bias
        if self.nan_below is not None:
            rewards = np.where(nxt[:, 0] < self.nan_below, np.nan, rewards)
        return StepPrediction(nxt.astype(np.float32), rewards, distance < 0.1)


class Sluggish(PointMassModel):
    """The point mass moving half as far as it really does."""

    def predict_step(self, observations, actions):
        step = super().predict_step(observations, 0.5 * np.asarray(actions))
        return StepPrediction(step.next_observations, step.rewards, step.terminations)


class FromOne(PointMassEnv):
    """The point mass, always started at 1 (the round-to-round spread left to the noise)."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._x = np.array([1.0], np.float32)
        return self._x.copy(), {}


def halfway(observations):
    """A policy's mean action: half the way back to 0."""
    return (-0.5 * np.asarray(observations)).astype(np.float32)


def closed_shadow_gaps(
    rounds: int, noise: float = 0.5, seed: int = 1, limit: int = 8
) -> tuple[np.ndarray, float]:
    """Per round of 4 groups of 4 (anchor fraction 0.5) on :class:`FromOne` with a
    :class:`Sluggish` model and a learner playing :func:`halfway` plus Gaussian ``noise``: the
    anchors' mean closed-shadow score minus the world-model members' mean score; and the
    share of anchors' real episodes that ended before ``limit``."""
    from wmrl_env import RewardFusion, WorldModelVectorEnv

    rng = np.random.default_rng(seed)
    envs = WorldModelVectorEnv(
        FromOne,
        Sluggish(),
        num_groups=4,
        group_size=4,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0),
        executor="inline",
        max_episode_steps=limit,
        shadow="closed",
        imagination_policy=halfway,
    )
    gaps, early = [], []
    for round_seed in range(rounds):
        obs, reset_info = envs.reset(seed=round_seed)
        anchors = reset_info["is_anchor"]
        while True:
            noisy = halfway(obs) + rng.normal(0, noise, obs.shape)
            obs, _, terminated, truncated, info = envs.step(np.clip(noisy, -1, 1))
            if (terminated | truncated).all():
                break
        gaps.append(info["wm_score"][anchors].mean() - info["wm_score"][~anchors].mean())
        early.append(np.mean(info["episode_length"][anchors] < limit))
    envs.close()
    return np.array(gaps), float(np.mean(early))


TIMING_KEYS = frozenset({"exec_seconds", "wm_seconds", "real_wall_seconds", "real_exec_seconds"})


def assert_same(a: Any, b: Any, skip: frozenset[str] = TIMING_KEYS, path: str = "") -> None:
    """Recursive exact equality (NaN equals NaN), ignoring the keys in ``skip`` (timings)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) - skip == set(b) - skip, path
        for key in set(a) - skip:
            assert_same(a[key], b[key], skip, f"{path}.{key}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, skip, f"{path}[{i}]")
    else:
        np.testing.assert_array_equal(a, b, err_msg=path)


class TargetEnv(gym.Env):
    """One-step continuous bandit: context ``c``, action ``a``, reward ``-(a - t_c)^2``."""

    TARGETS = np.array([-1.0, 0.5, 1.5])

    def __init__(self) -> None:
        self.observation_space = spaces.Discrete(len(self.TARGETS))
        self.action_space = spaces.Box(-2.0, 2.0, (1,), np.float32)
        self._context = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._context = int(self.np_random.integers(len(self.TARGETS)))
        return self._context, {}

    def step(self, action: np.ndarray):
        error = float(np.asarray(action).ravel()[0]) - self.TARGETS[self._context]
        return self._context, -(error**2), True, False, {}


class TargetWorldModel:
    """The target task's reward, shifted and scaled (a monotone bias the fusion calibrates)."""

    def predict(self, contexts: Sequence[Any], actions: Sequence[Any]) -> np.ndarray:
        a = np.asarray(actions, dtype=np.float64).reshape(len(actions), -1)[:, 0]
        error = a - TargetEnv.TARGETS[np.asarray(contexts, dtype=np.int64)]
        return 0.5 * -(error**2) + 0.3
