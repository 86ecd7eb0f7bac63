"""How an anchor member of a multi-step round gets its world-model score (its *shadow*).

The fusion pairs each anchor's world-model score with its real score (the debiasing's
calibration pairs, PPI's correction) and reads the pair as what it would have been for a
world-model member. A world-model member's score is a *closed* imagined episode: the policy
acts on the model's own states from the group start. Three shadows of an anchor:

* ``"open"``: the model replays the anchor's real actions from the group start, step by step
  while the real episode lasts. Those actions were chosen on the real states, so the score
  sees the real episode through them (and through its length): not the world-model members'
  kind of score, and an optimistic test of the success predictor.
* ``"closed"``: the policy plays the model from the group start, like a world-model member.
  With a Box action space the anchor's own sampling noise is kept (step ``t``'s action is
  ``policy(imagined state) + real action - policy(real state)`` while the real episode
  lasted): the imagined episode the same noise would have played, so the pair is (a
  world-model member's score, its real outcome). Where the imagined episode outlasts the real
  one, its actions carry on with fresh noise, as a world-model member's do: the noise of the
  actions the learner still sent for the ended episode (``spare``: ``action -
  policy(observation)`` on the frozen observation, drawn after the episode's end, so
  independent of it), then draws from every ended episode's such noise (``pool``). Without
  it (the policy's mean alone after the end) the closed shadow's score was biased against a
  world-model member's wherever real episodes end first (the noise's effect on the score
  missing). Exact when the policy's noise does not depend on the state (e.g. a Gaussian
  with a learnt, state-independent std).
* ``"continued"``: the first ``L // 2`` steps of a real episode of ``L`` steps are scored from
  the real states (one-step predictions with the real actions), then the policy plays the model
  closed from the real state there (noise kept as in ``"closed"``). A diagnostic: it sees half
  of the real episode.

Example:
    >>> import numpy as np
    >>> from wmrl_env.world_models.base import StepPrediction
    >>> class Walk:  # moves by 0.9 x the action; reward 1 and the end where x >= 2
    ...     def predict_step(self, obs, actions):
    ...         nxt = obs + 0.9 * actions
    ...         done = nxt[:, 0] >= 2
    ...         return StepPrediction(nxt, done.astype(float), done)
    >>> real_states = [np.array([[0.0], [1.2]])]  # the real episode: 0 -> 1.2 -> ...
    >>> real_actions = [np.array([[1.0], [1.0]])]  # chosen as 0.5 + noise 0.5
    >>> policy = lambda obs: np.full_like(obs, 0.5)  # the policy's action without noise
    >>> def score(mode, keep_noise=True):
    ...     shadow = AnchorShadow(mode, policy, keep_noise)
    ...     return shadow.scores(Walk(), real_states, real_actions, max_steps=2)[0]
    >>> score("closed"), score("continued")  # 0 -> 0.9 -> 1.8; 1.2 (real) -> 2.1
    (array([0.]), array([1.]))
    >>> score("closed", keep_noise=False)  # 0 -> 0.45 -> 0.9
    array([0.])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from wmrl_env.world_models.base import DynamicsWorldModel
from wmrl_env.wrappers.world_model_calls import predict_step

__all__ = ["SHADOWS", "AnchorShadow", "ShadowScores", "step_variance"]

SHADOWS = ("open", "closed", "continued")


class ShadowScores(NamedTuple):
    """The anchors' imagined scores, their validity, and each score's std: the root of the
    summed per-step variances (independent step errors), ``None`` when the model gave no
    usable std on some step."""

    score: np.ndarray
    valid: np.ndarray
    std: np.ndarray | None


def step_variance(step: Any, rows: np.ndarray) -> np.ndarray | None:
    """The squared std of ``step``'s predictions at ``rows``, ``None`` where the model gave
    none or a NaN, infinite or negative one (an unusable std is not passed on).

    >>> from wmrl_env.world_models.base import StepPrediction
    >>> std = np.array([0.5, 2.0])
    >>> step = StepPrediction(np.zeros((2, 1)), np.zeros(2), np.zeros(2, bool), std)
    >>> step_variance(step, np.array([True, False])).tolist()
    [0.25]
    """
    if step.std is None:
        return None
    std = np.asarray(step.std, dtype=np.float64)[rows]
    if not (np.isfinite(std) & (std >= 0)).all():
        return None
    return std**2


@dataclass(frozen=True)
class AnchorShadow:
    """A ``"closed"`` or ``"continued"`` shadow (``"open"`` needs none: the round steps it).

    Args:
        mode: ``"closed"`` or ``"continued"`` (see the module docstring).
        policy: the current policy, a batch of observations -> a batch of actions.
        keep_noise: add the anchor's own sampling noise (real action minus ``policy`` at the
            real state) to the imagined actions; only for continuous (Box) actions.
        bounds: ``(low, high)`` of a Box action space: imagined actions are clipped to it, as
            a learner clips the actions it plays (``None``: not clipped).
    """

    mode: str
    policy: Callable[[np.ndarray], Any]
    keep_noise: bool
    bounds: tuple[Any, Any] | None = None

    def __post_init__(self) -> None:
        if self.mode not in SHADOWS[1:]:
            raise ValueError(f"AnchorShadow mode must be one of {SHADOWS[1:]}, got {self.mode!r}")

    def scores(
        self,
        world_model: DynamicsWorldModel,
        real_states: Sequence[np.ndarray],
        real_actions: Sequence[np.ndarray],
        max_steps: int | np.ndarray,
        spare: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
        pool: tuple[np.ndarray, np.ndarray] | None = None,
        rng: np.random.Generator | None = None,
    ) -> ShadowScores:
        """World-model scores, validity and std of the anchors whose real episodes are given:
        per anchor, the ``L`` states its actions were chosen on (``[0]`` the group start) and
        the ``L`` actions (``L >= 1``). The imagined part lasts until a predicted termination,
        an invalid prediction or ``max_steps`` steps in all (one limit, or one per anchor).

        With ``keep_noise``, the imagined steps past the real episode take their noise from
        ``spare`` (per anchor, ``(observations, actions)``: the frozen observations its ended
        episode showed and the actions the learner still chose on them), then from ``pool``
        (``(observations, actions)`` of every ended episode, drawn with ``rng``); none when
        both are empty (the policy's mean alone)."""
        lengths = np.array([len(a) for a in real_actions])
        pairs = zip(real_states, real_actions, strict=True)
        if (lengths < 1).any() or any(len(s) != len(a) for s, a in pairs):
            raise ValueError("every anchor needs as many real states as actions, at least one")
        noise = self._noise(real_states, real_actions)
        if noise is not None and spare is not None:
            spare_noise = self._noise([o for o, _ in spare], [a for _, a in spare])
            noise = [np.concatenate([n, e]) for n, e in zip(noise, spare_noise, strict=True)]
        drawn = None
        if noise is not None and pool is not None and len(pool[1]):
            drawn = self._noise([pool[0]], [pool[1]])[0]
            rng = rng if rng is not None else np.random.default_rng()
        forced = lengths // 2 if self.mode == "continued" else np.zeros_like(lengths)
        score, valid, alive, variance = self._forced(world_model, real_states, real_actions, forced)
        states = np.stack([s[k] for s, k in zip(real_states, forced, strict=True)]).copy()
        limits = np.broadcast_to(np.asarray(max_steps, dtype=np.int64), lengths.shape)
        for t in range(int(forced.min()), int(limits.max(initial=0))):
            rows = np.flatnonzero(alive & (forced <= t) & (t < limits))
            if rows.size == 0:
                break
            actions = np.array(self.policy(states[rows]), copy=True)
            for j, i in enumerate(rows):
                if noise is not None and t < len(noise[i]):
                    actions[j] += noise[i][t]
                elif drawn is not None:
                    actions[j] += drawn[rng.integers(len(drawn))]
            if self.bounds is not None:
                actions = np.clip(actions, *self.bounds)
            step, _ = predict_step(world_model, states[rows], actions)
            step_var = step_variance(step, step.valid)
            if variance is not None and step_var is not None:
                variance[rows[step.valid]] += step_var
            else:
                variance = None
            score[rows[step.valid]] += step.rewards[step.valid]
            states[rows[step.valid]] = step.next_observations[step.valid]
            valid[rows[~step.valid]] = False
            alive[rows[~step.valid | step.terminations]] = False
        return ShadowScores(score, valid, None if variance is None else np.sqrt(variance))

    def _noise(
        self, real_states: Sequence[np.ndarray], real_actions: Sequence[np.ndarray]
    ) -> list[np.ndarray] | None:
        """Per anchor, its real actions minus the policy's at its real states."""
        if not self.keep_noise:
            return None
        lengths = [len(a) for a in real_actions]
        if not sum(lengths):
            return [np.asarray(a, dtype=np.float64) for a in real_actions]
        played = zip(real_states, lengths, strict=True)
        states = np.concatenate([np.asarray(s) for s, n in played if n])
        means = np.asarray(self.policy(states))
        ends = np.cumsum(lengths)[:-1]
        return [np.asarray(a) - m for a, m in zip(real_actions, np.split(means, ends), strict=True)]

    @staticmethod
    def _forced(
        world_model: DynamicsWorldModel,
        real_states: Sequence[np.ndarray],
        real_actions: Sequence[np.ndarray],
        forced: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Scores of the first ``forced`` steps, predicted from the real states (an episode
        the model ends there stays ended), with validity, who still lives and the scores'
        variance (``None`` without a usable std)."""
        n = len(real_states)
        score, valid, alive = np.zeros(n), np.ones(n, bool), np.ones(n, bool)
        variance: np.ndarray | None = np.zeros(n)
        if not forced.any():
            return score, valid, alive, variance
        owner = np.repeat(np.arange(n), forced)
        states = np.concatenate([s[:k] for s, k in zip(real_states, forced, strict=True)])
        actions = np.concatenate(
            [np.asarray(a)[:k] for a, k in zip(real_actions, forced, strict=True)]
        )
        step, _ = predict_step(world_model, states, actions)
        for i in range(n):
            own = owner == i
            ended = np.flatnonzero(step.terminations[own] | ~step.valid[own])
            last = ended[0] + 1 if ended.size else int(own.sum())
            valid[i] = bool(step.valid[own][:last].all())
            counted = np.flatnonzero(own)[:last][step.valid[own][:last]]
            score[i] = float(step.rewards[counted].sum())
            alive[i] = valid[i] and not ended.size
            step_var = step_variance(step, counted)
            if variance is not None and step_var is not None:
                variance[i] = float(step_var.sum())
            else:
                variance = None
        return score, valid, alive, variance
