"""A progress world model for robot tasks and the dense reward it gives.

:class:`ProgressModel` predicts task progress in ``[0, 1]`` from the state, with a std. It
learns from whole episodes (the states an episode visited, in order, and whether it
succeeded): :func:`progress_labels` labels state ``t`` of an episode of ``L`` transitions
``t / L`` when the episode succeeded (it ends in success: progress 1), and
``failure_ceiling * t / L`` when it did not (it moved on, but got at most part of the way).
:meth:`ProgressModel.pretrain` fits it on demonstrations (e.g. the scripted expert's, failed
episodes included); :meth:`ProgressModel.update` adds the current policy's own real episodes
after every round and refits (the model follows the policy's state distribution).

The regressor is scikit-learn's bagged ``ExtraTreesRegressor``: invariant to the scale of
each state feature (robot states mix metres, radians and gripper widths), fast enough to
refit every round on a few thousand states, and its trees' spread gives a std, scaled so that
it matches the out-of-bag error (a calibrated std: on held-out states the mean squared error
equals the mean predicted variance).

The dense reward of an episode is the sum of its per-step progress increments
``p(s_{t+1}) - p(s_t)`` (:func:`progress_increments`), which is ``p(last) - p(start)``: the
members of a GRPO group share their start, so within a group it ranks episodes by their
predicted final progress. :class:`DenseProgressFusion` calibrates it against the real sparse
success (:mod:`wmrl_env.robotics.progress_calibration`) and fuses the two.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> def episode(success):  # a 1-d "state" walking to 1 (success) or stalling at 0.4
    ...     end = 1.0 if success else 0.4
    ...     return np.linspace(0, end, 11)[:, None] + 0.01 * rng.normal(size=(11, 1)), success
    >>> model = ProgressModel(seed=0).pretrain([episode(i % 2 == 0) for i in range(20)])
    >>> mean, std = model.predict(np.array([[0.0], [0.4], [1.0]]))
    >>> bool(mean[0] < 0.2 < mean[1] < 0.5 < 0.8 < mean[2])
    True
    >>> float(progress_increments(model, np.array([[0.0], [1.0]])).sum()) > 0.6
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "DenseProgressFusion",
    "Episode",
    "ProgressModel",
    "demonstration_episodes",
    "progress_increments",
    "progress_labels",
    "progress_returns",
]

Episode = tuple[np.ndarray, bool]
"""``(states, succeeded)``: the ``L + 1`` states an episode of ``L`` transitions visited, in
order (first the start), and whether it succeeded."""


def progress_labels(length: int, succeeded: bool, failure_ceiling: float = 0.5) -> np.ndarray:
    """Progress labels of the ``length + 1`` states of one episode (see the module).

    >>> progress_labels(4, True).tolist(), progress_labels(4, False).tolist()
    ([0.0, 0.25, 0.5, 0.75, 1.0], [0.0, 0.125, 0.25, 0.375, 0.5])
    """
    if length < 1:
        raise ValueError(f"an episode needs at least one transition, got {length}")
    if not 0.0 <= failure_ceiling < 1.0:
        raise ValueError(f"failure_ceiling must be in [0, 1), got {failure_ceiling}")
    ceiling = 1.0 if succeeded else failure_ceiling
    return ceiling * np.arange(length + 1) / length


def demonstration_episodes(demos: Any) -> list[Episode]:
    """Per-step demonstrations (:class:`~wmrl_env.robotics.demonstrations.Demonstrations`) as
    episodes, each cut at its first success."""
    episodes = []
    episode, successes = np.asarray(demos.episode), np.asarray(demos.successes, bool)
    for index in np.unique(episode):
        steps = np.flatnonzero(episode == index)
        hit = successes[steps]
        if hit.any():
            steps = steps[: int(np.argmax(hit)) + 1]
        states = np.concatenate(
            [demos.observations[steps], demos.next_observations[steps[-1:]]]
        ).astype(np.float64)
        episodes.append((states, bool(hit.any())))
    return episodes


class ProgressModel:
    """Task progress in ``[0, 1]`` and its std from the state; see the module docstring.

    Args:
        n_estimators: trees of the bagged ensemble.
        min_samples_leaf: fewest states per leaf (smooths the prediction).
        failure_ceiling: progress label of a failed episode's last state.
        seed: seeds the trees.
    """

    def __init__(
        self,
        n_estimators: int = 60,
        min_samples_leaf: int = 3,
        failure_ceiling: float = 0.5,
        seed: int = 0,
    ) -> None:
        if n_estimators < 2:
            raise ValueError("n_estimators must be >= 2 (the std comes from the trees' spread)")
        progress_labels(1, False, failure_ceiling)  # checks the ceiling
        self.n_estimators, self.min_samples_leaf = n_estimators, min_samples_leaf
        self.failure_ceiling, self.seed = failure_ceiling, seed
        self.states: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.std_scale = 1.0
        self._model: Any = None

    @property
    def fitted(self) -> bool:
        return self._model is not None

    def pretrain(self, episodes: Sequence[Episode]) -> ProgressModel:
        """Fit on demonstration episodes (added to everything seen so far)."""
        return self.update(episodes)

    def update(self, episodes: Sequence[Episode]) -> ProgressModel:
        """Add real episodes (e.g. the current policy's own) and refit on everything seen."""
        for states, succeeded in episodes:
            states = np.asarray(states, np.float64)
            if states.ndim != 2 or len(states) < 2:
                raise ValueError(
                    f"an episode's states must be (L + 1, dim), L >= 1: {states.shape}"
                )
            if not np.isfinite(states).all():
                raise ValueError("an episode's states contain NaN or inf")
            if self.states and states.shape[1] != self.states[0].shape[1]:
                raise ValueError(
                    f"states of dim {states.shape[1]}, expected {self.states[0].shape[1]}"
                )
            self.states.append(states)
            self.labels.append(
                progress_labels(len(states) - 1, bool(succeeded), self.failure_ceiling)
            )
        if not self.states:
            raise ValueError("no episodes to fit the progress model on")
        self._fit(np.concatenate(self.states), np.concatenate(self.labels))
        return self

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        from sklearn.ensemble import ExtraTreesRegressor

        model = ExtraTreesRegressor(
            n_estimators=self.n_estimators,
            min_samples_leaf=self.min_samples_leaf,
            bootstrap=True,
            oob_score=True,
            random_state=self.seed,
            n_jobs=1,
        )
        model.fit(x, y)
        self._model = model
        # scale the trees' spread so that the mean predicted variance matches the out-of-bag
        # squared error (states every tree saw in its bootstrap have no out-of-bag prediction)
        oob = np.asarray(model.oob_prediction_)
        usable = np.isfinite(oob)
        spread = self._tree_std(x[usable])
        variance = float(np.mean(spread**2)) if usable.any() else 0.0
        error = float(np.mean((oob[usable] - y[usable]) ** 2)) if usable.any() else 0.0
        self.std_scale = float(np.sqrt(error / variance)) if variance > 0 else 1.0

    def _tree_std(self, states: np.ndarray) -> np.ndarray:
        per_tree = np.stack([tree.predict(states) for tree in self._model.estimators_])
        return per_tree.std(axis=0)

    def check(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """How well the model predicts episodes it has not seen (call it before
        :meth:`update`): over every state, the RMSE against the progress labels, the mean
        predicted std and the share of labels within one predicted std of the prediction
        (about 0.68 for a calibrated Gaussian error, higher for a heavier-tailed one)."""
        states = np.concatenate([np.asarray(s, np.float64) for s, _ in episodes])
        labels = np.concatenate(
            [progress_labels(len(s) - 1, bool(ok), self.failure_ceiling) for s, ok in episodes]
        )
        mean, std = self.predict(states)
        error = np.abs(mean - labels)
        return {
            "progress_rmse": float(np.sqrt(np.mean(error**2))),
            "progress_std": float(np.mean(std)),
            "progress_coverage": float(np.mean(error <= std)),
        }

    def predict(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(progress, std)`` per state (``(N, dim)``); progress clipped to ``[0, 1]``."""
        if self._model is None:
            raise RuntimeError("the progress model is not fitted: call pretrain() first")
        states = np.asarray(states, np.float64).reshape(len(states), -1)
        mean = np.clip(self._model.predict(states), 0.0, 1.0)
        return mean, self.std_scale * self._tree_std(states)


def progress_increments(model: ProgressModel, states: np.ndarray) -> np.ndarray:
    """The dense per-step rewards of one episode's ``L + 1`` states: ``p(s_{t+1}) - p(s_t)``
    (``L`` of them; their sum is ``p(last) - p(start)``)."""
    progress, _ = model.predict(np.asarray(states))
    return np.diff(progress)


def progress_returns(model: ProgressModel, episodes: Sequence[np.ndarray]) -> np.ndarray:
    """Each episode's dense return, the sum of its progress increments, from its states."""
    if not episodes:
        return np.zeros(0)
    lengths = [len(states) for states in episodes]
    progress, _ = model.predict(np.concatenate([np.asarray(s) for s in episodes]))
    ends = np.cumsum(lengths)
    return progress[ends - 1] - progress[ends - np.asarray(lengths)]


class DenseProgressFusion:
    """Fuses each real episode's sparse success with its dense progress return.

    Every episode runs in the simulator, so every episode is a calibration pair: the
    progress return is mapped to the success scale by a
    :class:`~wmrl_env.robotics.progress_calibration.ProgressCalibration` (``calibration``:
    by default a line fitted within groups on the pairs of the last ``window`` rounds, kept
    only when significantly positive), and the fused reward is
    ``(1 - dense_weight) * success + dense_weight * calibrated progress``.
    ``dense_weight=1`` is the dense reward alone (calibrated); the advantages are centred
    within each group and scaled over the batch
    (:func:`~wmrl_env.fusion.advantages.group_advantages`).

    Example:
        >>> import numpy as np
        >>> fusion = DenseProgressFusion(min_pairs=4)
        >>> groups = np.repeat(np.arange(2), 4)
        >>> progress = np.array([0.9, 0.5, 0.4, 0.1, 0.8, 0.6, 0.2, 0.3])
        >>> success = np.array([1, 0, 0, 0, 1, 1, 0, 0], float)
        >>> rewards, advantages = fusion.step(groups, progress, success)
        >>> bool(rewards[1] > rewards[3])  # two failures, told apart by their progress
        True
    """

    def __init__(
        self,
        dense_weight: float = 0.5,
        window: int = 8,
        min_pairs: int = 16,
        calibration: str = "affine",
    ) -> None:
        from wmrl_env.robotics.progress_calibration import ProgressCalibration

        if not 0.0 <= dense_weight <= 1.0:
            raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}")
        self.dense_weight = dense_weight
        self.calibrator = ProgressCalibration(calibration, window=window, min_pairs=min_pairs)

    def step(
        self, group_ids: np.ndarray, progress_return: np.ndarray, success: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(rewards, advantages)`` of one round's episodes; refits the calibration first."""
        from wmrl_env.fusion.advantages import group_advantages
        from wmrl_env.fusion.groups import GroupIndex

        group_ids = np.asarray(group_ids)
        progress = np.asarray(progress_return, np.float64)
        success = np.asarray(success, np.float64)
        if not progress.shape == success.shape == group_ids.shape:
            raise ValueError("group_ids, progress_return and success must have one shape")
        if not (np.isfinite(progress).all() and np.isfinite(success).all()):
            raise ValueError("progress_return and success must be finite")
        groups = GroupIndex.from_ids(group_ids)
        self.calibrator.update(progress, success, groups.inverse)
        calibrated = self.calibrator.transform(progress)
        rewards = (1.0 - self.dense_weight) * success + self.dense_weight * calibrated
        return rewards, group_advantages(rewards, groups)
