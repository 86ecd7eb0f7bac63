"""``WorldModelVectorEnv``: a gymnasium vector env of GRPO groups, answered by a world model.

``num_groups x group_size`` envs; the members of a group share their start (task context or
initial state). Each ``reset()`` starts a *round* (one GRPO batch): it draws one start per
group from the real env and lets the fusion choose the anchor groups. ``step()`` answers every
env from one batched world-model call and executes only the anchor groups in the real env,
concurrently; when the round's episodes have ended, :class:`~wmrl_env.fusion.RewardFusion`
turns the scores into rewards, weights and advantages (``info``). See ``docs/wrappers.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from wmrl_env.env_executors.gym_env import Backend, GymEnvExecutor
from wmrl_env.fusion import SCREENINGS, RewardFusion
from wmrl_env.rounds.engine import AnchoredRound
from wmrl_env.rounds.plan import ANCHOR_PRIORITIES, AnchorSelection, check_known_failure
from wmrl_env.world_models.base import AnyWorldModel
from wmrl_env.wrappers.branches import BranchStarts
from wmrl_env.wrappers.dynamics import DynamicsRound
from wmrl_env.wrappers.groups import GroupLayout
from wmrl_env.wrappers.imagined_priorities import imagined_priorities
from wmrl_env.wrappers.info import add_batch, add_per_env
from wmrl_env.wrappers.outcome import OutcomeRound
from wmrl_env.wrappers.rounds import InfrastructureHealth, Round, RoundSetup
from wmrl_env.wrappers.shadows import SHADOWS, AnchorShadow
from wmrl_env.wrappers.starts import GroupStarts, reset_groups
from wmrl_env.wrappers.world_model_calls import task_kind

if TYPE_CHECKING:
    from wmrl_env.robotics.dense_reward import ProgressReward

__all__ = ["WorldModelVectorEnv"]

ANCHOR_STREAM = 0xA7C  # second word of the anchor draw's seed: independent of the starts
SCREEN_STREAM = 0x5C2  # second word of the screening draw's seed


class WorldModelVectorEnv(VectorEnv):
    """A vector env of GRPO groups whose rewards come from a world model anchored in reality.

    Args:
        env_fn: builds the real env (``lambda: gym.make("MyTask-v0")``); called lazily by the
            executor, once per real env it needs.
        world_model: ``predict(contexts, artifacts)`` for outcome tasks (the context is the
            observation the env returned at reset, the artifact the action), or
            ``predict_step(observations, actions)`` for multi-step tasks.
        num_groups, group_size: the batch is ``num_groups * group_size`` envs.
        fusion: the :class:`~wmrl_env.fusion.RewardFusion` that chooses anchors and fuses
            rewards; default ``RewardFusion(method="wmrl")``.
        executor: ``"thread"`` (envs that wait on sandboxes or subprocesses), ``"process"``
            (CPU-bound simulators), ``"inline"``, or a :class:`GymEnvExecutor` (owned from then
            on: ``close()`` closes it).
        num_workers: threads or processes of the executor built from a name.
        task: ``"auto"`` (from the world model's methods), ``"outcome"`` or ``"dynamics"``.
        max_episode_steps: episode limit of world-model episodes in multi-step tasks; default
            the env spec's ``max_episode_steps``.
        score_range: ``(low, high)``: world-model scores outside it count as invalid.
        failed_reward: reward handed out for a real execution that failed in the
            infrastructure (the fusion's reward is NaN there and its advantage 0); pass a
            number for learners that cannot take NaN.
        failure_score: the real score of a program failure (crash, timeout, out of memory,
            invalid output: the action's own fault), which is then a calibration pair like
            any score; default ``score_range``'s low end, else program failures are left out
            (with a warning). Infrastructure failures (``error``, a dead worker) stay missing.
        max_infrastructure_failures: real executions failing in the infrastructure in a row
            before ``step`` raises :class:`~wmrl_env.wrappers.rounds.InfrastructureFailureError`
            (0: never).
        update_world_model: feed the anchors' real scores to ``world_model.update`` (outcome
            tasks, when the world model has that method).
        anchor_priority: ``"uniform"`` (default: anchors drawn at ``reset``) or
            ``"uncertainty"``: anchors drawn with priorities from the world model's
            predictive std, with exact inclusion probabilities (the fusion records them: PPI
            stays unbiased). Outcome tasks draw at ``step``, from the prediction
            (``info["is_anchor"]`` at reset is then all ``False``); multi-step tasks draw at
            ``reset``, from an imagined rollout of ``imagination_policy`` from each group's
            start (:func:`~wmrl_env.wrappers.imagined_priorities.imagined_priorities`).
            ``"ucb"`` (outcome tasks): drawn at ``step`` like ``"uncertainty"``, each group's
            priority its upper bound ``max_i (s_i + ucb_kappa * std_i)`` above the best real
            score executed so far in its context (:func:`~wmrl_env.fusion.ucb_priorities`),
            exact inclusion probabilities, PPI unbiased.
        ucb_kappa: ``kappa`` of the upper bound ``s + kappa * std`` used by ``"ucb"`` and by
            screening (0: the world model's mean alone; a world model without a std is read
            as std 0).
        execute_per_group: world-model screening (outcome tasks): execute only this many
            members of each anchor group (fewer than ``group_size``), chosen by their upper
            bound; the others are scored by the fusion. Default ``None``: every member. 1 is
            refused under ``wmrl`` with its evidence gate (nothing to learn from).
        screening: how screening chooses them: ``"pps"`` (default) draws them by systematic
            PPS within the group with exact probabilities ``pi_{i|g}`` (mixed with uniform
            by the fusion's ``uniform_mix``): each member's inclusion probability is
            ``pi_g * pi_{i|g}`` and PPI's correction stays unbiased for every member's real
            reward, the group mean and the advantages. ``"top"`` executes the
            ``execute_per_group`` highest upper bounds: a deterministic selection by the world
            model, best for finding good artifacts, but the members left out have
            probability 0, so no estimator of the group mean is unbiased (refused with
            ``ppi``). See ``docs/fusion.md``.
        known_failure: ``action -> bool`` (outcome tasks), True for an artifact that certainly
            fails without running it: it scores ``failure_score`` unexecuted, its group is
            not forced to execute, and it is no evidence for the fusion (``known_scores``).
            For program text pass the deterministic pre-gate,
            :class:`~wmrl_env.sandboxes.pregate.PreGate` (``PreGate(submission=
            "predictions.csv")`` for tasks whose programs write a file): ``info`` then
            records each known program's certain status (``known_status``).
        imagination_policy: multi-step tasks with ``anchor_priority="uncertainty"`` or a
            ``"closed"`` or ``"continued"`` shadow: the current policy as
            ``f(observations) -> actions`` (a batch each; e.g. its mean action, which leaves
            its sampling noise alone), read at every ``reset`` and at the end of every round.
        shadow: multi-step tasks: how an anchor member's world-model score is computed
            (:mod:`~wmrl_env.wrappers.shadows`). ``"open"`` (default): the model replays the
            anchor's real actions from the group start while its real episode lasts; those
            actions were chosen on the real states, so the score sees the real episode.
            ``"closed"``: ``imagination_policy`` plays the model from the group start, as
            for a world-model member (with Box actions, the anchor's own sampling noise
            kept, imagined actions clipped to the space): the pairing the fusion's debiasing
            and PPI assume (``ppi`` on a multi-step task needs it: the open shadow's pairing
            would bias PPI's correction). ``"continued"``: the
            real episode's first half, then imagined from the real state there (a
            diagnostic).
        branch_starts: multi-step tasks on an env with snapshots: a
            :class:`~wmrl_env.wrappers.branches.BranchStarts` that starts some groups of
            every round from real states the earlier rounds' real episodes reached, for a
            short horizon (imagination that stays near real data); ``info["start_age"]``
            says, per env, how many steps into its episode the group started.
        progress_reward: multi-step tasks with a Box observation space: a
            :class:`~wmrl_env.robotics.dense_reward.ProgressReward` that every real env pays
            through (:class:`~wmrl_env.robotics.dense_reward.DenseProgressReward`: the sparse
            reward fused with the progress model's per-step increments). When a round ends,
            the vector env calls its ``end_round()`` (the progress model's on-policy check,
            its update on the round's real episodes, the recalibration) and puts the check in
            ``info["batch"]["progress_check"]``. Real members' rewards, and so their real
            scores, are the dense-fused ones, and the fusion calibrates the world model's
            scores against them; world-model members keep the world model's reward. The
            executor must share the reward in this process: ``"thread"`` or ``"inline"``
            (refused with ``"process"``); a :class:`GymEnvExecutor` of your own is accepted
            only when built on ``progress_reward.wrap(env_fn)`` (the vector env cannot wrap
            the envs of an executor it did not build; the wrapped ``env_fn`` does not pickle,
            so it cannot go to worker processes either).

    Example:
        >>> import gymnasium as gym
        >>> import numpy as np
        >>> class Bandit(gym.Env):
        ...     observation_space, action_space = gym.spaces.Discrete(3), gym.spaces.Discrete(4)
        ...     def reset(self, *, seed=None, options=None):
        ...         super().reset(seed=seed)
        ...         self.task = int(self.np_random.integers(3))
        ...         return self.task, {}
        ...     def step(self, action):
        ...         return self.task, float(action == self.task), True, False, {}
        >>> class Guess:  # a world model: right answers score high, with a bias
        ...     def predict(self, contexts, actions):
        ...         return 0.8 * (np.asarray(contexts) == np.asarray(actions)) + 0.1
        >>> envs = WorldModelVectorEnv(Bandit, Guess(), num_groups=4, group_size=3,
        ...                            fusion=RewardFusion(method="wmrl", seed=0))
        >>> obs, info = envs.reset(seed=0)
        >>> obs.shape, info["is_anchor"].sum()  # one group of 3 is executed for real
        ((12,), np.int64(3))
        >>> obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
        >>> terminated.all(), sorted(info)[:3]
        (np.True_, ['_advantage', '_best_executed_action', '_best_executed_score'])
        >>> envs.close()
    """

    def __init__(
        self,
        env_fn: Callable[[], gym.Env],
        world_model: AnyWorldModel,
        num_groups: int = 8,
        group_size: int = 8,
        fusion: RewardFusion | None = None,
        *,
        executor: Backend | GymEnvExecutor = "thread",
        num_workers: int | None = None,
        task: str = "auto",
        max_episode_steps: int | None = None,
        score_range: tuple[float, float] | None = None,
        failed_reward: float = math.nan,
        failure_score: float | None = None,
        max_infrastructure_failures: int = 32,
        update_world_model: bool = True,
        anchor_priority: str = "uniform",
        ucb_kappa: float = 1.0,
        execute_per_group: int | None = None,
        screening: str = "pps",
        known_failure: Callable[[Any], bool] | None = None,
        imagination_policy: Callable[[np.ndarray], Any] | None = None,
        shadow: str = "open",
        branch_starts: BranchStarts | None = None,
        progress_reward: ProgressReward | None = None,
    ) -> None:
        super().__init__()
        if anchor_priority not in ANCHOR_PRIORITIES:
            raise ValueError(
                f"anchor_priority must be one of {ANCHOR_PRIORITIES}, got {anchor_priority!r}"
            )
        _check_screening(ucb_kappa, execute_per_group, screening, group_size)
        self.layout = GroupLayout(num_groups, group_size)
        self.num_groups, self.group_size = num_groups, group_size
        self.num_envs = self.layout.num_envs
        self.world_model = world_model
        self.kind = task_kind(world_model, task)
        if shadow not in SHADOWS:
            raise ValueError(f"shadow must be one of {SHADOWS}, got {shadow!r}")
        if shadow != "open" and self.kind != "dynamics":
            raise ValueError(
                f"shadow={shadow!r} needs a multi-step task: an outcome task's world model "
                "scores the anchor's own action, there is no episode to shadow"
            )
        needs_policy = anchor_priority == "uncertainty" and self.kind == "dynamics"
        if needs_policy and not callable(imagination_policy):
            raise ValueError(
                "anchor_priority='uncertainty' on a multi-step task needs imagination_policy "
                "(observations -> actions): its anchors play from the first step, so their "
                "priorities come from an imagined rollout of the policy from each group's start"
            )
        if shadow != "open" and not callable(imagination_policy):
            raise ValueError(
                f"shadow={shadow!r} needs imagination_policy (observations -> actions): the "
                "policy plays the anchors' shadows in the world model"
            )
        if imagination_policy is not None and not (needs_policy or shadow != "open"):
            raise ValueError(
                "imagination_policy is read only by multi-step tasks with "
                "anchor_priority='uncertainty' or a 'closed' or 'continued' shadow"
            )
        self.imagination_policy = imagination_policy
        self.shadow = shadow
        _check_branch_starts(branch_starts, self.kind, anchor_priority, num_groups)
        self.branch_starts = branch_starts
        if anchor_priority == "ucb" and self.kind != "outcome":
            raise ValueError(
                "anchor_priority='ucb' needs an outcome task: multi-step tasks run their "
                "anchors from the first step, before any prediction (use 'uncertainty' with "
                "an imagination_policy)"
            )
        if execute_per_group is not None and self.kind != "outcome":
            raise ValueError(
                "execute_per_group (screening) needs an outcome task: multi-step tasks run "
                "their anchors from the first step, before any prediction"
            )
        self.anchor_priority = anchor_priority
        self.ucb_kappa = float(ucb_kappa)
        self.execute_per_group = execute_per_group
        self.screening = screening
        self.fusion = fusion if fusion is not None else RewardFusion(method="wmrl")
        for method in ("select_anchors", "force_anchors", "screen_anchors", "step"):
            if not callable(getattr(self.fusion, method, None)):
                raise TypeError(f"fusion must be a RewardFusion, got {self.fusion!r}")
        # the round engine's own checks of the fusion against the screening, at construction
        AnchoredRound(self.fusion, selection=AnchorSelection(
            execute_per_group=execute_per_group, screening=screening, rng=np.random.default_rng(0)
        ))  # fmt: skip
        if self.kind == "dynamics" and shadow == "open" and self.fusion.method == "ppi":
            raise ValueError(
                "method 'ppi' on a multi-step task needs shadow='closed' (with an "
                "imagination_policy): the open shadow scores an anchor by replaying its real "
                "actions, chosen on the real states, which is not the score a world-model "
                "member gets, so PPI's correction would pair the wrong world-model score"
            )
        self._screen_rng = np.random.default_rng()
        if score_range is not None and not score_range[0] < score_range[1]:
            raise ValueError(f"score_range must be (low, high) with low < high, got {score_range}")
        self.score_range = score_range
        self.failed_reward = float(failed_reward)
        if failure_score is None:
            failure_score = score_range[0] if score_range is not None else math.nan
        self.failure_score = float(failure_score)
        check_known_failure(known_failure, self.kind, self.failure_score)
        self.known_failure = known_failure
        self.health = InfrastructureHealth(max_infrastructure_failures)
        self.update_world_model = update_world_model
        self.progress_reward = progress_reward
        if progress_reward is not None:
            env_fn = _dense_env_fn(progress_reward, env_fn, executor, self.kind)
        if isinstance(executor, GymEnvExecutor):
            self.executor = executor
        else:
            self.executor = GymEnvExecutor(env_fn, backend=executor, num_workers=num_workers)
        try:
            self._configure(self.executor.describe(), max_episode_steps)
            if progress_reward is not None and not isinstance(
                self.single_observation_space, gym.spaces.Box
            ):
                raise ValueError(
                    "progress_reward needs a Box observation space (the progress model reads "
                    f"array states), got {self.single_observation_space}"
                )
        except BaseException:
            self.executor.close()
            raise
        self._round: Round | None = None
        self.best_executed: dict[Any, tuple[float, Any]] = {}
        """outcome tasks: group context -> (best real score, its action) executed so far"""

    def _configure(self, description: Any, max_episode_steps: int | None) -> None:
        self.env_description = description
        self.single_observation_space = description.observation_space
        self.single_action_space = description.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**description.metadata, "autoreset_mode": AutoresetMode.DISABLED}
        self.max_episode_steps = max_episode_steps or description.max_episode_steps
        if self.kind == "dynamics":
            if not isinstance(self.single_observation_space, (gym.spaces.Box, gym.spaces.Text)):
                raise TypeError(
                    "multi-step tasks need a Box or Text observation space (the world model "
                    f"steps arrays or texts), got {self.single_observation_space}"
                )
            text = isinstance(self.single_observation_space, gym.spaces.Text)
            if text and self.shadow != "open":
                raise ValueError(
                    f"the {self.shadow!r} shadow imagines from recorded array states; text "
                    "observations take the 'open' shadow"
                )
            if self.max_episode_steps is None:
                raise ValueError(
                    "multi-step tasks need max_episode_steps (or an env spec that has it): a "
                    "world model may never predict the end of an episode"
                )
            if self.branch_starts is not None and not description.has_snapshots:
                raise ValueError(
                    "branch_starts needs an env with get_snapshot / restore_snapshot: a "
                    "branched group starts from the exact state a real episode reached"
                )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start a round: one real reset per group, anchors chosen by the fusion.

        ``seed`` seeds the group starts and the fusion's anchor draw (same seed, same starts,
        same anchors). ``options`` go to every real
        reset; ``options["reset_mask"]`` must cover every env (a round is reset as a whole).
        """
        self._check_open()
        options = dict(options) if options else None
        if options and "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"))
            if mask.shape != (self.num_envs,) or not mask.all():
                raise ValueError(
                    "WorldModelVectorEnv resets whole rounds (a GRPO batch): reset_mask must be "
                    "all True"
                )
        if seed is not None or self._np_random is None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
            if seed is not None:  # same seed, same anchors (a stream apart from the starts')
                self.fusion.reseed([seed, ANCHOR_STREAM])
                self._screen_rng = np.random.default_rng([seed, SCREEN_STREAM])
        seeds = self._np_random.integers(2**31 - 1, size=self.num_groups)
        starts = reset_groups(self.executor, seeds, options, self.env_description.has_snapshots)
        branch = None
        if self.branch_starts is not None:
            branch = self.branch_starts.plan(starts, self.max_episode_steps)
            starts = branch.starts
        engine = AnchoredRound(
            self.fusion,
            failure_score=self.failure_score,
            health=self.health,
            selection=AnchorSelection(
                priority=self.anchor_priority,
                ucb_kappa=self.ucb_kappa,
                reference=self._best_so_far(starts.observations),
                execute_per_group=self.execute_per_group,
                screening=self.screening,
                rng=self._screen_rng,
            ),
        )
        anchors = self._draw_anchors(engine, starts)
        setup = RoundSetup(
            layout=self.layout,
            starts=starts,
            anchors=anchors,
            executor=self.executor,
            world_model=self.world_model,
            engine=engine,
            score_range=self.score_range,
            failed_reward=self.failed_reward,
            known_failure=self.known_failure,
        )
        if self.kind == "outcome":
            self._round = OutcomeRound(setup, self.update_world_model)
        else:
            text = isinstance(self.single_observation_space, gym.spaces.Text)
            dtype = object if text else self.single_observation_space.dtype
            self._round = DynamicsRound(
                setup, self.max_episode_steps, dtype, self._shadow(), branch
            )
        info: dict[str, Any] = {}
        is_anchor = np.zeros(self.num_envs, dtype=bool) if anchors is None else anchors.copy()
        add_per_env(info, group_id=self.layout.group_ids.copy(), is_anchor=is_anchor)
        if branch is not None:
            add_per_env(info, start_age=self._round.start_age.copy())
        for group, group_info in enumerate(starts.infos):
            if not group_info:
                continue
            for i in range(group * self.group_size, (group + 1) * self.group_size):
                info["env_info"] = self._add_info(info.get("env_info", {}), group_info, i)
        return self._batch(self.layout.expand(starts.observations)), info

    def _shadow(self) -> AnchorShadow | None:
        """The anchors' shadow of a multi-step round (``None``: open, stepped by the round)."""
        if self.shadow == "open":
            return None
        space = self.single_action_space
        if not isinstance(space, gym.spaces.Box):
            return AnchorShadow(self.shadow, self.imagination_policy, keep_noise=False)
        bounds = (space.low, space.high)
        return AnchorShadow(self.shadow, self.imagination_policy, keep_noise=True, bounds=bounds)

    def _draw_anchors(self, engine: AnchoredRound, starts: GroupStarts) -> np.ndarray | None:
        """The round's anchors per env; ``None`` for an outcome task's uncertainty-driven
        anchors (drawn at ``step``, from the prediction)."""
        group_ids = self.layout.group_ids
        if self.anchor_priority == "uniform":
            return engine.draw(group_ids)
        if self.kind == "outcome":
            return None
        priorities = imagined_priorities(
            self.world_model,
            self.imagination_policy,
            np.stack([np.asarray(o) for o in starts.observations]),
            self.max_episode_steps,
        )
        per_env = np.asarray(self.layout.expand(list(priorities)))
        return engine.draw(group_ids, priorities=per_env)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Play one step of the round; see ``docs/wrappers.md`` for what comes back."""
        self._check_open()
        if self._round is None or self._round.done:
            raise RuntimeError(
                "the round has ended (or never started): call reset() to start the next one; "
                "WorldModelVectorEnv never autoresets (metadata['autoreset_mode'] is DISABLED)"
            )
        per_env = list(iterate(self.action_space, actions))
        if len(per_env) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(per_env)}")
        out = self._round.step(per_env)
        if self.progress_reward is not None and self._round.done:
            check = self.progress_reward.end_round()  # check, update, recalibrate
            add_batch(out.info, self.num_envs, progress_check=check)
        if self.kind == "outcome":
            self._track_best_executed(per_env, out.info)
        elif self.branch_starts is not None and self._round.done:
            self.branch_starts.end_round(self._round.visited)
        return (
            self._batch(out.observations),
            out.rewards,
            out.terminated,
            out.truncated,
            out.info,
        )

    def _track_best_executed(self, actions: list[Any], info: dict[str, Any]) -> None:
        """Remember, per group context (the start observation), the best artifact executed
        so far (what one would deploy), and add ``best_executed_score`` /
        ``best_executed_action`` per env to ``info`` (NaN / None before any execution)."""
        contexts = self.layout.expand(self._round.setup.starts.observations)
        keys = [_context_key(c) for c in contexts]
        for key, score, action in zip(keys, info["real_score"], actions, strict=True):
            if np.isfinite(score) and score > self.best_executed.get(key, (-np.inf, None))[0]:
                self.best_executed[key] = (float(score), action)
        best = [self.best_executed.get(key, (math.nan, None)) for key in keys]
        add_per_env(
            info,
            best_executed_score=np.array([b[0] for b in best]),
            best_executed_action=np.array([b[1] for b in best] + [None], dtype=object)[:-1],
        )

    def _best_so_far(self, observations: list[Any]) -> np.ndarray:
        """Per env, the best real score executed so far in its group's context (NaN: none)."""
        best = [self.best_executed.get(_context_key(o), (math.nan, None))[0] for o in observations]
        return np.repeat(np.array(best, dtype=np.float64), self.group_size)

    def _batch(self, observations: list[Any]) -> Any:
        empty = create_empty_array(self.single_observation_space, self.num_envs)
        return concatenate(self.single_observation_space, observations, empty)

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("WorldModelVectorEnv is closed")

    def close_extras(self, **kwargs: Any) -> None:
        """Close the executor: every real env and worker process (none when ``__init__``
        failed before creating it: gymnasium's ``__del__`` still calls this)."""
        executor = getattr(self, "executor", None)
        if executor is not None:
            executor.close()

    def __repr__(self) -> str:
        return (
            f"WorldModelVectorEnv({self.kind}, num_groups={self.num_groups}, "
            f"group_size={self.group_size}, fusion={getattr(self.fusion, 'method', '?')})"
        )


def _check_branch_starts(
    branch: BranchStarts | None, kind: str, anchor_priority: str, num_groups: int
) -> None:
    """Refuse branch starts where they cannot work, before anything starts."""
    if branch is None:
        return
    if not isinstance(branch, BranchStarts):
        raise TypeError(f"branch_starts must be a BranchStarts, got {branch!r}")
    if kind != "dynamics":
        raise ValueError("branch_starts needs a multi-step task: it starts episodes mid-way")
    if anchor_priority != "uniform":
        raise ValueError(
            "branch_starts draws anchors uniformly: anchor_priority='uncertainty' imagines "
            "whole episodes from each group's start"
        )
    if branch.groups > num_groups:
        raise ValueError(f"BranchStarts(groups={branch.groups}) but num_groups={num_groups}")


def _check_screening(
    ucb_kappa: float, execute_per_group: int | None, screening: str, group_size: int
) -> None:
    if not (isinstance(ucb_kappa, (int, float)) and math.isfinite(ucb_kappa) and ucb_kappa >= 0):
        raise ValueError(f"ucb_kappa must be a finite number >= 0, got {ucb_kappa!r}")
    if screening not in SCREENINGS:
        raise ValueError(f"screening must be one of {SCREENINGS}, got {screening!r}")
    if execute_per_group is None:
        return
    if isinstance(execute_per_group, bool) or not isinstance(execute_per_group, (int, np.integer)):
        raise ValueError(f"execute_per_group must be an int or None, got {execute_per_group!r}")
    if not 1 <= execute_per_group < group_size:
        raise ValueError(
            f"execute_per_group must be in [1, group_size - 1 = {group_size - 1}] (screening "
            f"executes fewer members than a group holds), got {execute_per_group}"
        )


def _dense_env_fn(
    progress_reward: ProgressReward,
    env_fn: Callable[[], gym.Env],
    executor: Backend | GymEnvExecutor,
    kind: str,
) -> Callable[[], gym.Env]:
    """The env factory of a vector env with ``progress_reward`` (its envs pay the dense
    reward), after checking that the configuration can share the reward."""
    if kind != "dynamics":
        raise ValueError(
            "progress_reward needs a multi-step task (a world model with predict_step): the "
            "dense reward is paid per step of a real episode"
        )
    if not callable(getattr(progress_reward, "wrap", None)):
        raise TypeError(f"progress_reward must be a ProgressReward, got {progress_reward!r}")
    if not isinstance(executor, GymEnvExecutor):
        if executor == "process":
            raise ValueError(
                "progress_reward needs executor='thread' or 'inline': its envs record their "
                "episodes in the shared ProgressReward, of which worker processes would each "
                "hold a copy"
            )
        return progress_reward.wrap(env_fn)
    if getattr(executor.env_fn, "scorer", None) is not progress_reward:
        raise ValueError(
            "with progress_reward, an executor of your own must build its envs with "
            "progress_reward.wrap(env_fn): the vector env cannot wrap the envs of an executor "
            "it did not build"
        )
    return env_fn


def _context_key(context: Any) -> Any:
    """A dict key for a group's start observation (arrays by dtype, shape and bytes)."""
    if isinstance(context, np.ndarray):
        return (context.dtype.str, context.shape, context.tobytes())
    try:
        hash(context)
    except TypeError:
        return repr(context)
    return context
