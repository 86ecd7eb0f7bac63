"""The dense progress reward inside a real env: every episode runs in the simulator, and its
reward is the sparse success fused with the progress model's per-step increments.

:class:`ProgressReward` is shared by all the envs of a run: the progress model
(:class:`~wmrl_env.robotics.progress.ProgressModel`), the calibration of a progress return to
the success scale (:class:`~wmrl_env.robotics.progress_calibration.ProgressCalibration`: by
default a line fitted within starts, which keeps failures ordered by their progress;
``calibrate=False``: the raw progress) and the episodes played since the last
:meth:`ProgressReward.end_round`.
:class:`DenseProgressReward` wraps each real env: with ``P_t = p(s_t) - p(s_0)`` the progress
made so far and ``f`` the calibration, step ``t`` pays
``(1 - dense_weight) * sparse_t + dense_weight * (f(P_t) - f(P_{t-1}))``, so an episode's
return is ``(1 - dense_weight) * success + dense_weight * (f(P_last) - f(0))``: members of a
group share their start, so within a group it ranks episodes by their predicted final
progress beside their real success. ``info["sparse_reward"]`` keeps the env's own reward.

After every round, :meth:`ProgressReward.end_round` measures the model on the round's
episodes (before it sees them: on-policy, out of sample: the AUC of success from predicted
final progress, and how often the progress labels fall within one predicted std), then updates
the model on them (co-evolution) and refits the calibration on (progress return, success)
pairs. The wrapper's
episode record travels with the env's snapshots, so an episode parked and restored goes on
with its own states.

Example (needs robosuite)::

    scorer = ProgressReward(ProgressModel().pretrain(demonstration_episodes(demos)))
    env = DenseProgressReward(ActionChunking(RobosuiteEnv("Lift", reward_shaping=False), 8),
                              scorer)
    ...  # play a round of real episodes
    check = scorer.end_round()   # on-policy check, then update and recalibrate

``WorldModelVectorEnv(..., progress_reward=scorer)`` does both for a GRPO run: it builds its
real envs with :meth:`ProgressReward.wrap` and calls :meth:`ProgressReward.end_round` when a
round ends (the check in ``info["batch"]["progress_check"]``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from wmrl_env.robotics.progress import ProgressModel

__all__ = ["DenseEnvFn", "DenseProgressReward", "ProgressReward"]


class ProgressReward:
    """The progress model, its calibration and the round's episodes, shared by the envs.

    Args:
        model: a pretrained :class:`ProgressModel`.
        dense_weight: weight of the dense part (1: progress only).
        calibrate: map progress to the success scale, fitted on the real episodes'
            (progress return, success) pairs (``False``: the raw progress return).
        update: update the model on every round's episodes.
        calibration: how (:class:`~wmrl_env.robotics.progress_calibration.ProgressCalibration`):
            ``"affine"`` (a line fitted within starts, kept only when significantly
            positive) or ``"isotonic"``.
        min_pairs: fewest pairs before the calibration is fitted.
    """

    def __init__(
        self,
        model: ProgressModel,
        dense_weight: float = 0.5,
        calibrate: bool = True,
        update: bool = True,
        min_pairs: int = 16,
        calibration: str = "affine",
    ) -> None:
        from wmrl_env.robotics.progress_calibration import ProgressCalibration

        if not 0.0 <= dense_weight <= 1.0:
            raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}")
        if not model.fitted:
            raise ValueError("the progress model must be pretrained first")
        self.model, self.dense_weight = model, dense_weight
        self.calibrate, self.update = calibrate, update
        self.calibrator = (
            ProgressCalibration(calibration, min_pairs=min_pairs) if calibrate else None
        )
        self.episodes: list[tuple[np.ndarray, bool]] = []
        self._lock = threading.Lock()

    def progress(self, states: np.ndarray) -> np.ndarray:
        return self.model.predict(np.asarray(states))[0]

    def calibrated(self, made: float) -> float:
        """``f(P)``: the calibrated value of progress made ``P``."""
        if self.calibrator is None:
            return float(made)
        return float(self.calibrator.transform(np.array([made]))[0])

    def wrap(self, env_fn: Callable[[], gym.Env]) -> DenseEnvFn:
        """``env_fn`` whose every env is wrapped in :class:`DenseProgressReward` around this
        reward (what ``WorldModelVectorEnv(progress_reward=...)`` builds its real envs with)."""
        return DenseEnvFn(env_fn, self)

    def record(self, states: list[np.ndarray], succeeded: bool) -> None:
        with self._lock:
            self.episodes.append((np.stack(states), bool(succeeded)))

    def end_round(self) -> dict[str, Any] | None:
        """The round's on-policy check (predicted final progress against success, pooled and
        within starts: episodes with the same start state; the progress labels' coverage by
        the predicted std, :meth:`ProgressModel.check`), then the update (the episodes the
        model has learnt from under ``"progress_episodes"``) and the recalibration (its fit
        after this round under ``"calibration"``); ``None`` when no episode ended."""
        from wmrl_env.bench.robotics.predictor_check import predictor_check

        with self._lock:
            episodes, self.episodes = self.episodes, []
        if not episodes:
            return None
        finals = self.progress(np.stack([states[-1] for states, _ in episodes]))
        success = np.array([ok for _, ok in episodes])
        keys = [states[0].tobytes() for states, _ in episodes]
        groups = np.unique(keys, return_inverse=True)[1]
        check = {**predictor_check(finals, success, groups).to_dict(), **self.model.check(episodes)}
        if self.update:
            self.model.update(episodes)
        check["progress_episodes"] = len(self.model.states)  # learnt from, after the update
        if self.calibrator is not None:
            starts = self.progress(np.stack([states[0] for states, _ in episodes]))
            made = self.progress(np.stack([states[-1] for states, _ in episodes])) - starts
            self.calibrator.update(made, success.astype(float), groups)
            check["calibration"] = self.calibrator.summary()
        return check


class DenseProgressReward(gym.Wrapper):
    """A real env paying the fused dense reward of a shared :class:`ProgressReward`."""

    def __init__(self, env: gym.Env, scorer: ProgressReward) -> None:
        super().__init__(env)
        self.scorer = scorer
        self._states: list[np.ndarray] = []
        self._start = 0.0
        self._paid = 0.0  # f(P) paid so far
        self._success = False

    def _begin(self, observation: Any) -> None:
        state = np.asarray(observation, np.float64).copy()
        self._states = [state]
        self._start = float(self.scorer.progress(state[None])[0])
        self._paid = self.scorer.calibrated(0.0)
        self._success = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._begin(observation)
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, sparse, terminated, truncated, info = self.env.step(action)
        state = np.asarray(observation, np.float64).copy()
        self._states.append(state)
        self._success |= bool(info.get("success", False))
        made = float(self.scorer.progress(state[None])[0]) - self._start
        value = self.scorer.calibrated(made)
        weight = self.scorer.dense_weight
        reward = (1.0 - weight) * float(sparse) + weight * (value - self._paid)
        self._paid = value
        if terminated or truncated:
            self.scorer.record(self._states, self._success)
        return observation, reward, terminated, truncated, {**info, "sparse_reward": sparse}

    def _inner(self, name: str) -> Any:
        from wmrl_env.env_executors.play import env_attribute

        method = env_attribute(self.env, name)
        if not callable(method):
            raise TypeError(f"the wrapped env has no {name}")
        return method

    def get_snapshot(self) -> dict[str, Any]:
        """The env's snapshot and this episode's record (states, start progress, paid)."""
        return {
            "env": self._inner("get_snapshot")(),
            "states": [s.copy() for s in self._states],
            "start": self._start,
            "paid": self._paid,
            "success": self._success,
        }

    def restore_snapshot(self, snapshot: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        if not isinstance(snapshot, dict) or "env" not in snapshot:
            raise ValueError("not a DenseProgressReward snapshot")
        observation, info = self._inner("restore_snapshot")(snapshot["env"])
        self._states = [np.array(s, copy=True) for s in snapshot["states"]]
        self._start, self._paid = float(snapshot["start"]), float(snapshot["paid"])
        self._success = bool(snapshot["success"])
        return observation, info


class DenseEnvFn:
    """An env factory: ``env_fn``'s env wrapped in :class:`DenseProgressReward` around
    ``scorer`` (:meth:`ProgressReward.wrap`)."""

    def __init__(self, env_fn: Callable[[], gym.Env], scorer: ProgressReward) -> None:
        if not callable(env_fn):
            raise TypeError(f"env_fn must be a callable returning a gymnasium.Env, got {env_fn!r}")
        self.env_fn, self.scorer = env_fn, scorer

    def __call__(self) -> DenseProgressReward:
        return DenseProgressReward(self.env_fn(), self.scorer)
