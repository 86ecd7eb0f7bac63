"""The real transitions of a round: what the anchor groups played in the real environment.

A multi-step :class:`~wmrl_env.WorldModelVectorEnv` round steps its anchor groups in the real
env and every other group in the world model. The anchors' steps are real data: a dynamics
world model is refitted on them after every round. :func:`anchor_transitions` reads them off
a :class:`~wmrl_env.grpo.loop.Rollout`: per active anchor step, the observation, the action
as executed, the next observation, the step's real reward and whether it terminated.

Example:
    >>> import numpy as np
    >>> from wmrl_env.grpo.loop import Rollout
    >>> rollout = Rollout(
    ...     observations=[np.zeros((2, 3))], actions=[np.ones((2, 1))], log_probs=[None],
    ...     active=[np.array([True, True])], executed_actions=[np.ones((2, 1))],
    ...     next_observations=[np.ones((2, 3))], terminated=[np.array([True, False])],
    ...     infos=[{"is_anchor": np.array([True, False]), "step_reward": np.array([1.0, 0.0])}])
    >>> real = anchor_transitions(rollout)
    >>> real.observations.shape, real.rewards, real.terminations
    ((1, 3), array([1.]), array([ True]))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wmrl_env.grpo.loop import Rollout

__all__ = ["Transitions", "anchor_transitions"]


@dataclass(frozen=True)
class Transitions:
    """Transitions as flat arrays; ``actions`` keep their per-step shape (e.g. a chunk)."""

    observations: np.ndarray
    actions: np.ndarray
    next_observations: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray

    def __len__(self) -> int:
        return len(self.observations)

    def flat_actions(self) -> np.ndarray:
        """Actions as ``(N, action_size)`` rows (a chunk flattened), as dynamics models take."""
        return self.actions.reshape(len(self.actions), -1)


def anchor_transitions(rollout: Rollout) -> Transitions:
    """Every active step of an anchor member in ``rollout`` (empty arrays when none)."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "act", "next", "rew", "term")}
    for step, info in enumerate(rollout.infos):
        rows = np.flatnonzero(np.asarray(rollout.active[step]) & np.asarray(info["is_anchor"]))
        parts["obs"].append(np.asarray(rollout.observations[step])[rows])
        parts["act"].append(np.asarray(rollout.executed_actions[step])[rows])
        parts["next"].append(np.asarray(rollout.next_observations[step])[rows])
        parts["rew"].append(np.asarray(info["step_reward"], dtype=np.float64)[rows])
        parts["term"].append(np.asarray(rollout.terminated[step], dtype=bool)[rows])
    return Transitions(*(np.concatenate(v) for v in parts.values()))
