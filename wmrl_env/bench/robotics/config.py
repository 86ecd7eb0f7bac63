"""The configuration of ``wmrl bench --domain robosuite``: one dataclass, reused by the CLI.

Example:
    >>> quick = RobotBenchConfig.quick()
    >>> quick.arms, quick.seeds
    (('real', 'anchors', 'wm', 'wmrl', 'ppi'), 2)
    >>> RobotBenchConfig.full().iterations > quick.iterations
    True
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, Literal

from wmrl_env.bench.config import ANCHORS_ARM
from wmrl_env.fusion import RewardFusion
from wmrl_env.wrappers.shadows import SHADOWS

DEFAULT_ROBOT_ARMS: tuple[str, ...] = ("real", ANCHORS_ARM, "wm", "wmrl", "ppi")
DENSE_ARMS: tuple[str, ...] = ("dense", "wmrl-dense")
"""every episode real, rewarded by the progress model (:mod:`wmrl_env.robotics.dense_reward`):
``dense`` the raw progress return alone, ``wmrl-dense`` the sparse success fused with the
calibrated progress return (half each)"""
BRANCH_ARMS: tuple[str, ...] = ("wmrl-branch",)
"""fused like ``wmrl``, but from the second round on ``branch_groups`` of its groups start from
real states its real episodes of the last ``branch_rounds`` rounds reached and play on to the
episode's end (or ``branch_horizon`` chunks) (:class:`~wmrl_env.wrappers.branches.BranchStarts`)"""
ROBOT_ARMS: tuple[str, ...] = DEFAULT_ROBOT_ARMS + DENSE_ARMS + BRANCH_ARMS
BENCH_FUSION_ARGUMENTS = frozenset({"method", "anchor_fraction", "seed"})
WORLD_MODELS: tuple[str, ...] = ("dynamics", "random")
SUCCESS_PREDICTORS: tuple[str, ...] = ("classifier", "termination")


@dataclass
class RobotBenchConfig:
    """What ``wmrl bench --domain robosuite`` trains and measures.

    A behaviour-cloned action-chunking policy (:func:`wmrl_env.robotics.make_base_policy`, one
    per seed) is post-trained with GRPO on binary success in robosuite ``task``: each round
    plays ``num_groups`` groups of ``group_size`` episodes, the members of a group starting
    from one bit-identical state. Every ``eval_every`` rounds the mean-chunk policy is scored
    on ``eval_starts`` fixed held-out start seeds (never charged to training).
    """

    arms: tuple[str, ...] = DEFAULT_ROBOT_ARMS
    """"real" (every group in the simulator), "anchors" (only the fused arms' share of
    groups, all real, no world model), "wm" (world model only), "wmrl", "ppi" (fused);
    on request "dense" and "wmrl-dense" (every group real, a progress model's dense reward,
    :data:`DENSE_ARMS`) and "wmrl-branch" (short imagined pieces from real states,
    :data:`BRANCH_ARMS`)"""
    seeds: int = 4
    """independent runs per arm (each seed its own base policy, starts and noise)"""
    first_seed: int = 0
    """first seed (run a bench in per-seed pieces: ``--first-seed 2 --seeds 1``)"""
    task: str = "Lift"
    """robosuite task with a base-policy recipe"""
    iterations: int = 6
    """GRPO rounds per run"""
    num_groups: int = 4
    """groups (start states) per round"""
    group_size: int = 4
    """episodes per group (same start, different sampled chunks)"""
    anchor_fraction: float = 0.25
    """share of groups the fused arms execute for real (at least one)"""
    eval_every: int = 2
    """evaluate every this many rounds (and after the last)"""
    eval_starts: int = 12
    """held-out start seeds of every evaluation (the same ones for every arm and round)"""
    interim_eval_starts: int | None = None
    """evaluations before the last round score only the first this many of the held-out
    starts (``None``: all). Opt-in, it changes what is measured: the learning curves and the
    speedups read from them get noisier; the start and every arm's final success keep all
    ``eval_starts``. It cuts the evaluation steps, which are about half of a seed's CPU"""
    learning_rate: float = 5e-5
    """Adam learning rate of the policy. Small on purpose: Adam's first steps move every
    weight by about the learning rate, and the cloned policy's log-probability (56 action
    dimensions at std 0.22) is sensitive: at 3e-4 one step gave an approximate KL of 3.5 and
    clipped 96 % of the ratios (measured on training starts, seed 0)"""
    update_epochs: int = 4
    """gradient steps per round"""
    world_model: Literal["dynamics", "random"] = "dynamics"
    """"dynamics": the ensemble plus a success predictor, pretrained on the demonstrations
    and refitted on the anchors every round; "random": random scores, nothing moves (the
    never-worse check)"""
    success_predictor: Literal["classifier", "termination"] = "termination"
    """what turns imagined states into success: the ensemble's own termination head
    (default: it ranks the base policy's own episodes better, ROC AUC 0.78-0.84 against 0.64-0.65,
    docs/benchmarks.md), or a classifier on the imagined state; both are measured on held-out
    demonstrations, and the one in use on every round's real episodes"""
    ensemble_size: int = 5
    """members of the dynamics ensemble"""
    hidden: int = 200
    """width of the ensemble members' two hidden layers"""
    workers: int = 1
    """threads stepping the real envs of a round (1: each real chunk's seconds are its own;
    with more, a chunk's clock also counts the time it waits for the others)"""
    fusion_options: dict[str, Any] = field(default_factory=dict)
    """further :class:`~wmrl_env.fusion.RewardFusion` arguments of every arm (e.g.
    ``{"wm_gate": "off"}``, or the gate's ``gate_decay`` and ``gate_alpha``); the method, anchor
    fraction and seed are the bench's. Checked here: an unknown name or a value the fusion
    refuses is a ``ValueError`` before anything runs"""
    uncertainty_anchors: bool = False
    """the fused arms draw their anchor groups with priorities from the world model's
    uncertainty on an imagined rollout of the current (mean-chunk) policy from each group's
    start, with exact inclusion probabilities (``WorldModelVectorEnv(anchor_priority=
    "uncertainty")``); default: uniform draws"""
    shadow: Literal["closed", "open", "continued"] = "closed"
    """how each real episode's world-model score is computed
    (``WorldModelVectorEnv(shadow=...)``): ``"closed"`` (default) the mean-chunk policy plays
    the model from the group start with the episode's own sampling noise, as the world-model
    members are scored: the pairing the fusion's debiasing and PPI assume; ``"open"`` the
    model replays the episode's real chunks (the bench before this option: optimistic, the
    chunks were chosen on the real states); ``"continued"`` the episode's first half from the
    real states, then imagined (a diagnostic)"""
    branch_groups: int = 3
    """``wmrl-branch``: groups per round started from recorded real states (at most
    ``num_groups``)"""
    branch_horizon: int | None = None
    """``wmrl-branch``: most chunks a branched group plays (``None``: on to the episode's end,
    so its success is the task's)"""
    branch_rounds: int = 2
    """``wmrl-branch``: rounds of real states the branched starts are drawn from"""
    bounded_envs: bool = True
    """keep at most ``workers`` real envs alive per arm (a slot's episode is parked in a
    snapshot while another plays: bit-identical results); ``False``: one env per real member
    of a round (about 5x more env builds)"""
    recipe: dict[str, Any] = field(default_factory=dict)
    """changes to the task's base-policy recipe (fields of
    :class:`wmrl_env.robotics.BasePolicyRecipe`, e.g. ``num_episodes``); none by default"""
    cache_dir: str = "runs/base_policy"
    """where base policies and their demonstrations are cached"""
    out: str | None = None
    """output folder; default runs/robot-bench-<time>"""

    def __post_init__(self) -> None:
        self.arms = tuple(self.arms)
        unknown = set(self.arms) - set(ROBOT_ARMS)
        if unknown or not self.arms:
            raise ValueError(f"unknown or no arms {sorted(unknown)}; choose from {ROBOT_ARMS}")
        for name, allowed in (
            ("world_model", WORLD_MODELS),
            ("success_predictor", SUCCESS_PREDICTORS),
            ("shadow", SHADOWS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.shadow == "open" and "ppi" in self.arms:
            raise ValueError(
                "the ppi arm needs the closed shadow: the open one pairs each real episode with "
                "a replay of its own chunks, which biases PPI's correction"
            )
        for name in (
            "seeds",
            "iterations",
            "num_groups",
            "group_size",
            "eval_every",
            "eval_starts",
            "update_epochs",
            "ensemble_size",
            "hidden",
            "workers",
            "branch_groups",
            "branch_rounds",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        check_fusion_options(self.fusion_options)
        if self.branch_horizon is not None and self.branch_horizon < 1:
            raise ValueError("branch_horizon must be >= 1 (or None: to the episode's end)")
        if set(BRANCH_ARMS) & set(self.arms):
            if self.branch_groups > self.num_groups:
                raise ValueError(
                    f"branch_groups ({self.branch_groups}) must be <= num_groups "
                    f"({self.num_groups})"
                )
            if self.uncertainty_anchors:
                raise ValueError(
                    "wmrl-branch draws its anchors uniformly: uncertainty_anchors imagines "
                    "whole episodes from each group's start"
                )
        interim = self.interim_eval_starts
        if interim is not None and not 1 <= interim <= self.eval_starts:
            raise ValueError(f"interim_eval_starts must be in [1, eval_starts], got {interim}")
        if self.first_seed < 0:
            raise ValueError("first_seed must be >= 0")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2 (GRPO compares members of a group)")
        if not 0.0 < self.anchor_fraction <= 1.0:
            raise ValueError("anchor_fraction must be in (0, 1]")
        if not self.learning_rate > 0:
            raise ValueError("learning_rate must be positive")

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds))

    @classmethod
    def quick(cls, **overrides) -> RobotBenchConfig:
        """A few minutes on 2 cores: 2 seeds, 2 rounds of 4 groups of 4, 8 held-out starts."""
        settings = dict(
            seeds=2, iterations=2, num_groups=4, group_size=4, anchor_fraction=0.25,
            eval_every=1, eval_starts=8, ensemble_size=3, hidden=128,
        )  # fmt: skip
        return cls(**{**settings, **overrides})

    @classmethod
    def full(cls, **overrides) -> RobotBenchConfig:
        """Sized by the power analysis of the robot bench (docs/history.md, "How many seeds, starts
        and rounds"): 40 seeds, 6 rounds of
        4 x 4, one anchor group a round, 50 held-out starts: enough for ``real``'s improvement
        over the start to exclude 0 if it is about +0.10. About 0.11 CPU-hours a seed, 4.5 in
        all on this machine: run it in per-seed pieces (``first_seed``, ``seeds``)."""
        return cls(**{"seeds": 40, "eval_starts": 50, **overrides})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def check_fusion_options(options: dict[str, Any]) -> None:
    """Refuse what :class:`~wmrl_env.fusion.RewardFusion` would refuse, before a run starts:
    a name it does not take, one the bench sets itself, or a value it rejects.

    >>> check_fusion_options({"gate_decay": 0.9})
    >>> check_fusion_options({"gate_window": 4})
    Traceback (most recent call last):
    ...
    ValueError: fusion_options: unknown RewardFusion argument(s) ['gate_window']; it takes ...
    """
    if not isinstance(options, dict):
        raise ValueError(f"fusion_options must be a dict, got {type(options).__name__}")
    reserved = BENCH_FUSION_ARGUMENTS & set(options)
    if reserved:
        raise ValueError(f"fusion_options cannot set {sorted(reserved)}: the bench sets them")
    accepted = set(inspect.signature(RewardFusion).parameters) - BENCH_FUSION_ARGUMENTS
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValueError(
            f"fusion_options: unknown RewardFusion argument(s) {unknown}; it takes "
            f"{sorted(accepted)}"
        )
    for method in ("wmrl", "ppi", "real"):
        try:
            RewardFusion(method=method, **options)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"fusion_options {options} refused (method {method}): {error}"
            ) from error
