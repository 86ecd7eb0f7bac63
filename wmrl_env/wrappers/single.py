"""``WorldModelWrapper``: one env, answered by a world model, a random share of episodes real.

For users with one env and a non-group RL library (SB3's PPO, SAC, ...). Each episode is an
anchor with probability ``anchor_probability``: anchor episodes run in the real env, the
others are answered by the world model. Every ``pairs_per_update`` anchor episodes go to
:meth:`RewardFusion.observe_anchors` — the fusion's own calibrate -> cross-fit -> kappa ->
gate sequence, with groups of one — and the world model's scores are calibrated by the
fusion's map and shrunk by its gate: a world-model episode returns
``level + lam * (f(s) - level)`` (``level``: the mean real score of the calibration window;
``lam``: :class:`~wmrl_env.fusion.WorldModelGate`'s weight, pooled across episodes, each
update one cluster), so a useless world model hands out the level, not noise.
``info["wm_weight"]`` is that ``lam``; ``info["weight"]`` the inverse-variance weight of the
episode's reward stream.

* Outcome tasks (``predict(contexts, artifacts)``): one step; the context is the observation
  the env returned at reset. A world-model episode returns the shrunk calibrated score.
* Multi-step tasks (``predict_step``): world-model episodes are imagined by the model from the
  real reset observation and get the model's per-step rewards; at their last step the reward
  also carries the correction from the episode's return ``S`` to its shrunk calibrated score,
  so the episode's return is that score. Anchor episodes step the real env while the model
  shadows them with the same actions, which gives the (world-model, real) return pair.

An invalid prediction sends the episode to the real env (outcome: the step is executed;
multi-step: the actions so far are replayed from the start): it is *forced*, executed with
certainty. An action known to fail without running it (``known_failure``, outcome tasks)
is never executed and returns ``failure_score``. A failing real step does not raise:
``info["exec_status"]`` says what happened and the reward falls back to the calibrated
world-model score, or ``failed_reward`` when there is none; but
``max_infrastructure_failures`` infrastructure failures in a row raise
:class:`~wmrl_env.rounds.InfrastructureFailureError` (the anchored round's circuit breaker),
and anchor episodes whose real step failed count towards the fusion's updates, so the
gate's weight falls without new evidence (``gate_horizon``).

With ``method="ppi"`` an episode returns PPI's reward instead: a drawn anchor
``r / p - lam (1 / p - 1) f`` (``p``: ``anchor_probability``), a forced one ``r``, a
world-model episode ``lam f`` (``f`` the calibrated score, ``lam`` the gate's weight, both
from earlier updates), so each episode's expected reward over the draw is its real return.
Each episode is an anchored round of one sample, planned and recorded like every other
(:mod:`wmrl_env.rounds`): the real steps fold into a
:class:`~wmrl_env.rounds.RealRecord` and the episode's final info carries the round metrics
(:data:`~wmrl_env.rounds.ROUND_METRICS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.core import ActType, ObsType

from wmrl_env.fusion import RewardFusion, fusion_weights
from wmrl_env.fusion.ppi import rectified_rewards
from wmrl_env.rounds import (
    DEFAULT_MAX_INFRASTRUCTURE_FAILURES,
    InfrastructureHealth,
    RealRecord,
    known_outcomes,
)
from wmrl_env.rounds.plan import check_known_failure
from wmrl_env.world_models.base import AnyWorldModel
from wmrl_env.wrappers.episode import Episode
from wmrl_env.wrappers.world_model_calls import predict_outcome, predict_step, task_kind

__all__ = ["WorldModelWrapper"]


class WorldModelWrapper(
    gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs
):
    """A single-env wrapper that answers most episodes from a world model.

    Args:
        env: the real env (reset is cheap; stepping it is what the wrapper saves).
        world_model: ``predict(contexts, artifacts)`` or ``predict_step(observations, actions)``.
        anchor_probability: chance that an episode runs in the real env.
        fusion: a :class:`~wmrl_env.fusion.RewardFusion` with method ``"wmrl"``,
            ``"debias"`` or ``"ppi"`` and ``centre_groups=False``; default
            ``RewardFusion(method="wmrl", window=8, decay=0.8, min_pairs=8, centre_groups=False)``.
        pairs_per_update: anchor episodes collected before each fusion update (one update is
            one "step" of the calibration window).
        task: ``"auto"``, ``"outcome"`` or ``"dynamics"``.
        max_episode_steps: limit of imagined episodes (multi-step); default the env spec's.
        score_range: ``(low, high)``: world-model scores outside it count as invalid.
        failed_reward: reward when neither a real nor a valid world-model score exists.
        failure_score: the real score of an episode whose real step failed by the program's
            own fault (a non-finite reward: ``invalid_output``), which is then a calibration
            pair; default ``score_range``'s low end, else such an episode is treated like an
            infrastructure failure (``error``: the env raised), whose score is missing.
        known_failure: ``action -> bool`` (outcome tasks), True for an action certainly
            failing without running it (e.g. :func:`~wmrl_env.sandboxes.does_not_parse`, or
            a :class:`~wmrl_env.sandboxes.pregate.PreGate`): never executed, it returns
            ``failure_score`` (needed then).
        max_infrastructure_failures: real steps failing in the infrastructure in a row (the
            env raised) before ``step`` raises
            :class:`~wmrl_env.rounds.InfrastructureFailureError` (0: never).

    Example:
        >>> import numpy as np
        >>> class Bandit(gym.Env):
        ...     observation_space, action_space = gym.spaces.Discrete(3), gym.spaces.Discrete(3)
        ...     def reset(self, *, seed=None, options=None):
        ...         super().reset(seed=seed)
        ...         self.task = int(self.np_random.integers(3))
        ...         return self.task, {}
        ...     def step(self, action):
        ...         return self.task, float(action == self.task), True, False, {}
        >>> class Guess:
        ...     def predict(self, contexts, actions):
        ...         return 0.9 * (np.asarray(contexts) == np.asarray(actions))
        >>> env = WorldModelWrapper(Bandit(), Guess(), anchor_probability=0.5)
        >>> obs, info = env.reset(seed=1)
        >>> obs, reward, terminated, truncated, info = env.step(obs)
        >>> terminated, sorted(info)[:4]
        (True, ['anchor_probability', 'calibrated_score', 'exec_status', 'fused_reward'])
    """

    def __init__(
        self,
        env: gym.Env,
        world_model: AnyWorldModel,
        anchor_probability: float = 0.1,
        *,
        fusion: RewardFusion | None = None,
        pairs_per_update: int = 8,
        task: str = "auto",
        max_episode_steps: int | None = None,
        score_range: tuple[float, float] | None = None,
        failed_reward: float = 0.0,
        failure_score: float | None = None,
        known_failure: Callable[[Any], bool] | None = None,
        max_infrastructure_failures: int = DEFAULT_MAX_INFRASTRUCTURE_FAILURES,
    ) -> None:
        if not 0.0 <= anchor_probability <= 1.0:
            raise ValueError(f"anchor_probability must be in [0, 1], got {anchor_probability}")
        if pairs_per_update < 1:
            raise ValueError(f"pairs_per_update must be >= 1, got {pairs_per_update}")
        gym.utils.RecordConstructorArgs.__init__(
            self,
            anchor_probability=anchor_probability,
            pairs_per_update=pairs_per_update,
            task=task,
            max_episode_steps=max_episode_steps,
            score_range=score_range,
            failed_reward=failed_reward,
        )
        gym.Wrapper.__init__(self, env)
        self.world_model = world_model
        self.kind = task_kind(world_model, task)
        self.anchor_probability = anchor_probability
        self.fusion = fusion or RewardFusion(
            method="wmrl", window=8, decay=0.8, min_pairs=8, centre_groups=False
        )
        if self.fusion.method not in ("wmrl", "debias", "ppi"):
            raise ValueError(
                f"the single-env wrapper calibrates and weighs episodes: the fusion's method must "
                f"be 'wmrl', 'debias' or 'ppi', got {self.fusion.method!r}"
            )
        self.pairs_per_update = pairs_per_update
        self.score_range = score_range
        self.failed_reward = float(failed_reward)
        if failure_score is None:
            failure_score = score_range[0] if score_range is not None else math.nan
        self.failure_score = float(failure_score)
        check_known_failure(known_failure, self.kind, self.failure_score)
        self.known_failure = known_failure
        self.health = InfrastructureHealth(max_infrastructure_failures)
        spec = env.spec
        self.max_episode_steps = max_episode_steps or (spec.max_episode_steps if spec else None)
        if self.kind == "dynamics" and self.max_episode_steps is None:
            raise ValueError("multi-step tasks need max_episode_steps (or an env spec with it)")
        self._pending: list[tuple[float, float, float]] = []  # (wm score, real score, std)
        self._stale = 0  # anchor episodes without evidence since the last update
        self._anchor_rng = np.random.default_rng()
        self._episode: Episode | None = None

    # -- gymnasium API -----------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        if seed is not None:  # same seed, same anchor decisions
            self._anchor_rng = np.random.default_rng([seed, 0xA7C0])
        is_anchor = bool(self._anchor_rng.random() < self.anchor_probability)
        self._episode = Episode(observation, is_anchor, self._record())
        return observation, {
            **info,
            "is_anchor": is_anchor,
            "anchor_probability": self.anchor_probability,
        }

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        episode = self._episode
        if episode is None or episode.done:
            raise RuntimeError("call reset() before step() (the episode has ended)")
        episode.actions.append(action)
        episode.steps += 1
        if self.kind == "outcome":
            return self._outcome_step(episode, action)
        return self._dynamics_step(episode, action)

    def _outcome_step(self, episode: Episode, action: Any) -> tuple[Any, float, bool, bool, dict]:
        prediction, _ = predict_outcome(
            self.world_model, [episode.start], [action], self.score_range
        )
        episode.wm_return, episode.wm_valid = float(prediction.scores[0]), bool(prediction.valid[0])
        if prediction.std is not None:
            episode.wm_std = float(prediction.std[0])
        known, _ = known_outcomes(self.known_failure, [action])
        if known[0]:  # never executed: its outcome is the failure score
            episode.known = True
            episode.executed = False
        elif not (episode.is_anchor or episode.wm_valid):
            episode.executed = True  # an invalid prediction goes to the real env
        if not episode.executed:
            return self._end(episode, episode.start, True, False, {})
        real = episode.real_step(self.env, action)
        return self._end(episode, real.observation, True, False, real.info)

    def _dynamics_step(self, episode: Episode, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if episode.executed:
            if episode.model_active:  # the model shadows the real episode, same actions
                self._model_step(episode, action)
            real = episode.real_step(self.env, action)
            observation, reward, info = real.observation, real.reward, real.info
            terminated, truncated = real.terminated, real.truncated or real.status != "ok"
        else:
            observation, reward, terminated = self._model_step(episode, action)
            truncated, info = not episode.wm_valid, {}
        truncated = truncated or (not terminated and episode.steps >= self.max_episode_steps)
        if terminated or truncated:
            return self._end(episode, observation, terminated, truncated, info)
        episode.paid += reward
        return observation, reward, False, False, {**info, "is_anchor": episode.executed}

    def _model_step(self, episode: Episode, action: Any) -> tuple[Any, float, bool]:
        """One imagined step from the episode's model state; ``(obs, reward, terminated)``."""
        state = np.asarray(episode.model_observation)[None]
        prediction, _ = predict_step(self.world_model, state, np.asarray(action)[None])
        if not prediction.valid[0]:
            episode.wm_valid = episode.model_active = False
            return episode.model_observation, 0.0, False
        episode.model_observation = prediction.next_observations[0]
        episode.wm_return += float(prediction.rewards[0])
        terminated = bool(prediction.terminations[0])
        episode.model_active = not terminated
        return episode.model_observation, float(prediction.rewards[0]), terminated

    def _record(self) -> RealRecord:
        return RealRecord(1, self.failure_score, self.health)

    def _end(
        self, episode: Episode, observation: Any, terminated: bool, truncated: bool, info: dict
    ) -> tuple[Any, float, bool, bool, dict]:
        """Close the episode: its return is real when executed, else the calibrated model's.

        The last step's reward is that return minus the rewards already handed out, so the
        episode's rewards add up to it.
        """
        episode.done = True
        if not episode.executed and not episode.wm_valid and not episode.known:
            episode.executed = True  # forced: replayed for real
            episode.replay(self.env)
        record = episode.record
        real_score = float(record.score[0]) if episode.executed else math.nan
        calibrated = math.nan
        if episode.wm_valid:
            calibrated = float(self.fusion.calibrator.transform(np.array([episode.wm_return]))[0])
        if episode.known:
            episode_return = self.failure_score
        elif math.isfinite(real_score):
            episode_return = self._real_reward(episode, real_score, calibrated)
        elif episode.wm_valid:
            episode_return = self._world_model_reward(calibrated)
        else:
            episode_return = self.failed_reward
        if episode.is_anchor and not episode.known:  # after the rewards: earlier evidence only
            self._evidence(episode, real_score)
        reward = episode_return - episode.paid
        return (
            observation,
            reward,
            terminated,
            truncated,
            {
                **info,
                **self._weights(episode.executed),
                "is_anchor": episode.executed,
                "anchor_probability": self.anchor_probability,
                "inclusion_probability": 1.0 if episode.forced else self.anchor_probability,
                "wm_score": episode.wm_return,
                "wm_valid": episode.wm_valid,
                "calibrated_score": calibrated,
                "wm_weight": self.fusion.wm_weight,
                "fused_reward": episode_return,
                "real_score": real_score,
                "exec_status": str(record.status[0]),
                "known_failure": episode.known,
                **episode.round_metrics(),
            },
        )

    def _real_reward(self, episode: Episode, real_score: float, calibrated: float) -> float:
        """An executed episode's reward: its real return; under ``ppi`` a drawn anchor's is
        rectified by its inclusion probability (a forced one, executed with certainty, and
        one without a valid prediction keep their real return)."""
        if self.fusion.method != "ppi" or not (episode.is_anchor and episode.wm_valid):
            return real_score
        p = np.array([self.anchor_probability])
        f = np.array([calibrated])
        reward = rectified_rewards(f, f, np.array([real_score]), np.array([True]), p, self._lam())
        return float(reward[0])

    def _world_model_reward(self, calibrated: float) -> float:
        """A world-model episode's reward: ``lam f`` under ``ppi``, else the calibrated
        score shrunk towards the window's real level (:meth:`_shrunk`)."""
        if self.fusion.method == "ppi":
            return self._lam() * calibrated
        return self._shrunk(calibrated)

    def _lam(self) -> float:
        return float(self.fusion.wm_weight)

    def _evidence(self, episode: Episode, real_score: float) -> None:
        """File a drawn anchor's evidence: a pair when both scores exist; a real step that
        failed in the infrastructure counts as an update without evidence."""
        if math.isfinite(real_score) and episode.wm_valid:
            self._add_pair(episode.wm_return, real_score, episode.wm_std)
        elif bool(episode.record.failed[0]):
            self._stale += 1
            self._update()

    def _shrunk(self, calibrated: float) -> float:
        """``level + lam * (f - level)``: the calibrated score shrunk by the gate's weight
        towards the mean real score of the calibration window (``f`` itself before any)."""
        _, reals = self.fusion.calibrator.window_pairs()
        if reals.size == 0:
            return calibrated
        level = float(reals.mean())
        return level + self.fusion.wm_weight * (calibrated - level)

    def _add_pair(self, wm_score: float, real_score: float, std: float) -> None:
        """Buffer an anchor pair; every ``pairs_per_update`` anchor episodes (pairs and
        failed executions), the fusion learns from the pairs (the world model's std, where
        it gives one, goes to the gate)."""
        self._pending.append((wm_score, real_score, std))
        self._update()

    def _update(self) -> None:
        if len(self._pending) + self._stale < self.pairs_per_update:
            return
        rows = np.array(self._pending, dtype=np.float64).reshape(-1, 3)
        self._pending, self._stale = [], 0
        std = rows[:, 2] if rows.size and np.isfinite(rows[:, 2]).all() else None
        self.fusion.observe_anchors(rows[:, 0], rows[:, 1], wm_std=std)

    def _weights(self, executed: bool) -> dict[str, float]:
        """The fusion's weights (kappa on real episodes, 1 elsewhere) normalised to mean 1
        at the expected anchor share ``p``: the batch formula with ``m / M = p``."""
        kappa = self.fusion.kappa_estimator.kappa
        weight = fusion_weights(np.array([executed]), kappa, self.anchor_probability)[0]
        return {"kappa": kappa, "weight": float(weight)}
