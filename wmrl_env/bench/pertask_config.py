"""The configuration of ``wmrl bench --regime pertask``: one dataclass, reused by the CLI.

In the per-task regime every held-out task improves from its own executions: each task has
its own softmax policy over the suite's programs (tabular or factorized over the programs'
components), every round samples one group of ``group_size`` programs per task, and the
fused arms execute ``anchor_fraction`` of those groups for real (the ``anchors`` arm executes
as many, and only those). Rewards replay the suite's committed table (each execution
charged its recorded seconds): the first suite's execution table, or the pool table of the
second suite (rewards on validation scores, readings on the private test).

Example:
    >>> quick = PerTaskConfig.quick()
    >>> quick.anchor_draw, quick.optimizer, quick.budgets
    ('balanced', 'sgd', (8, 16, 32))
    >>> PerTaskConfig(world_model="mix:0.5").mix_weight
    0.5
    >>> PerTaskConfig.quick().suite, PerTaskConfig.quick().policy
    ('pool', 'factorized')
    >>> PerTaskConfig.quick(suite="v1").policy
    'tabular'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from wmrl_env.bench.config import ARMS
from wmrl_env.bench.factorized import POLICIES
from wmrl_env.bench.tabular import OPTIMIZERS
from wmrl_env.fusion.validation import GATE_SCOPES
from wmrl_env.rounds.plan import ONE_EXECUTED_MEMBER

ANCHOR_DRAWS: tuple[str, ...] = ("balanced", "random", "ucb", "balanced-ucb")
SCREENINGS: tuple[str, ...] = ("pps", "top")
SUITES: tuple[str, ...] = ("v1", "pool")
SUITE_WORLD_MODELS = {"v1": None, "pool": "v4"}
"""the ML world model each suite's arms use: the v1 suite the package default, the pool
suite v4 (the one that reads any program of the open space, pretrained on generated tasks
of other seeds than the held-out ones and on the first suite's real datasets)"""
SUITE_POLICIES = {"v1": "tabular", "pool": "factorized"}
"""each suite's default policy: the first suite keeps the tabular policy its figures were
measured with; the pool suite's is parametric over the grammar's slots, so one execution
teaches the policy about every program that shares a choice"""


@dataclass
class PerTaskConfig:
    """What ``wmrl bench --regime pertask`` runs and measures."""

    arms: tuple[str, ...] = ARMS
    """arms to compare (see :data:`wmrl_env.bench.config.ARMS`)"""
    seeds: int = 5
    """reported runs per arm"""
    tuning_seeds: int = 1
    """runs per arm and learning rate of the sweep that picks each arm's rate; their seeds
    (1000, 1001, ...) are never reported"""
    rounds: int = 40
    """rounds per run (a fused arm executes ``group_size * anchor_fraction`` programs per
    task per round on average)"""
    group_size: int = 8
    """programs sampled per task per round"""
    anchor_fraction: float = 0.1
    """share of the tasks' groups executed for real each round (at least one)"""
    anchor_draw: str = "balanced"
    """"random": a simple random sample of groups (pi = m / T); "balanced": systematic PPS
    sampling with priority on the tasks anchored least so far, mixed with uniform by
    ``balance_mix`` (every pi exact and >= m * balance_mix / T, so PPI stays unbiased);
    "ucb": PPS with priority the group's world-model upper bound above the task's best
    executed score (:func:`~wmrl_env.fusion.ucb_priorities`), mixed likewise;
    "balanced-ucb": that priority on the least-executed tasks only. Arms without a world
    model (``anchors``) draw "random" / "balanced" in their place"""
    balance_mix: float = 0.2
    """share of uniform probability in the balanced and ucb draws (bounds 1 / pi)"""
    ucb_kappa: float = 1.0
    """kappa of the upper bound ``mean + kappa * std`` (ucb draws and screening)"""
    execute_per_group: int = 0
    """world-model screening in the fused arms: execute this many of each anchor group's
    ``group_size`` programs, chosen by their upper bound; the others are scored by the
    fusion. The anchor groups per round grow by ``group_size / execute_per_group`` (at most
    every task), so a round executes as many programs as without screening. 0: off"""
    screening: str = "pps"
    """"pps": members drawn by PPS within the group with exact probabilities (PPI stays
    unbiased); "top": the highest upper bounds (deterministic; ppi refuses it)"""
    gate_scope: str = "pooled"
    """the fused arms' evidence gate (:class:`~wmrl_env.fusion.RewardFusion`'s
    ``gate_scope``): "pooled", one world-model weight bounded on every task's anchors; or
    "cluster", each task's weight from its own anchors (each task has its own policy here)"""
    heldout_tasks: int = 0
    """a fixed sample of this many held-out tasks (0: all of them)"""
    world_model: str = "default"
    """"default" (the suite's ML world model, :data:`SUITE_WORLD_MODELS`), "random" (uniform
    scores), or "mix:W" (``(1 - W)`` * the default model's prediction + ``W`` * the table's
    truth: the reward, validation scores in the pool suite)"""
    optimizer: str = "sgd"
    """"sgd" or "adam" for the per-task policies"""
    policy: str = "default"
    """"tabular" (one logit per program), "factorized" (a logit summed over the program's
    components: preprocessing x model x capacity in the v1 suite, the grammar's slots in
    the pool suite) or "default" (the suite's, :data:`SUITE_POLICIES`)"""
    suite: str = "pool"
    """"pool" (default): the second suite's held-out tasks (generated and real-data) replayed
    from the pool tables (each task's policy restricted to the pool's programs), rewards on
    validation scores, every reading on private-test scores, world model v4; "v1": the
    held-out tasks of the first suite, rewards and readings on the execution table's test
    scores"""
    learning_rates: tuple[float, ...] = (0.3, 1.0, 3.0)
    """the sweep: each arm runs at the rate of this grid that scores best on the tuning seeds"""
    common_rate: bool = True
    """also run every arm at one common rate (``anchors``' tuned rate): the common-rate rows"""
    budgets: tuple[int, ...] = (8, 16, 32)
    """real executions per task at which the arms and the search lines are compared"""
    last_k: int = 3
    """evaluations averaged into each reading (the last ``k`` at or before the budget)"""
    quality_weights: tuple[float, ...] = ()
    """for the quality curve: extra runs of the fused arms with world models ``mix:W`` for
    each W (their learning rates: those tuned with the configured world model)"""
    quality_arms: tuple[str, ...] = ("wmrl", "ppi")
    """the arms the quality curve runs"""
    bootstrap: int = 2000
    """bootstrap resamples (seeds x tasks) of every interval"""
    tolerance: float = 0.01
    """a saving is read where an arm reaches ``real``'s score at a budget minus this"""
    out: str | None = None
    """output folder; default runs/bench-pertask-<time>; a folder holding some of the runs
    already is resumed (runs already there are read, not rerun)"""

    def __post_init__(self) -> None:
        self.arms = tuple(self.arms)
        self.learning_rates = tuple(float(r) for r in self.learning_rates)
        self.budgets = tuple(int(b) for b in self.budgets)
        self.quality_weights = tuple(float(w) for w in self.quality_weights)
        self.quality_arms = tuple(self.quality_arms)
        unknown = (set(self.arms) | set(self.quality_arms)) - set(ARMS)
        if unknown:
            raise ValueError(f"unknown arms {sorted(unknown)}; choose from {ARMS}")
        if not self.arms:
            raise ValueError("give at least one arm")
        if self.anchor_draw not in ANCHOR_DRAWS:
            raise ValueError(f"anchor_draw must be one of {ANCHOR_DRAWS}, got {self.anchor_draw!r}")
        if self.screening not in SCREENINGS:
            raise ValueError(f"screening must be one of {SCREENINGS}, got {self.screening!r}")
        if not 0 <= self.execute_per_group < self.group_size:
            raise ValueError(
                f"execute_per_group must be in [0, group_size - 1] (0: no screening), "
                f"got {self.execute_per_group}"
            )
        if self.ucb_kappa < 0:
            raise ValueError(f"ucb_kappa must be >= 0, got {self.ucb_kappa}")
        runs_ppi = "ppi" in self.arms or ("ppi" in self.quality_arms and self.quality_weights)
        if self.execute_per_group and self.screening == "top" and runs_ppi:
            raise ValueError(
                "screening 'top' cannot run the ppi arm: members left out with probability 0 "
                "have no unbiased correction; use screening 'pps' or leave ppi out"
            )
        runs_wmrl = "wmrl" in self.arms or ("wmrl" in self.quality_arms and self.quality_weights)
        if self.execute_per_group == 1 and runs_wmrl:
            raise ValueError(
                f"execute_per_group 1 cannot run the wmrl arm: {ONE_EXECUTED_MEMBER}; "
                "execute at least 2, or leave wmrl out"
            )
        if self.gate_scope not in GATE_SCOPES:
            raise ValueError(f"gate_scope must be one of {GATE_SCOPES}, got {self.gate_scope!r}")
        if self.suite not in SUITES:
            raise ValueError(f"suite must be one of {SUITES}, got {self.suite!r}")
        if self.policy == "default":
            self.policy = SUITE_POLICIES[self.suite]
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        parse_world_model(self.world_model)  # raises on a bad spec
        for name in ("seeds", "tuning_seeds", "rounds", "group_size", "last_k", "bootstrap"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.heldout_tasks < 0:
            raise ValueError("heldout_tasks must be >= 0")
        if not 0.0 < self.anchor_fraction <= 1.0:
            raise ValueError("anchor_fraction must be in (0, 1]")
        if not 0.0 < self.balance_mix <= 1.0:
            raise ValueError("balance_mix must be in (0, 1]")
        if not self.learning_rates or min(self.learning_rates) <= 0:
            raise ValueError("learning_rates must be positive numbers")
        if not self.budgets or min(self.budgets) < 1:
            raise ValueError("budgets must be positive numbers of executions per task")
        if any(not 0.0 <= w <= 1.0 for w in self.quality_weights):
            raise ValueError("quality_weights must be in [0, 1]")

    @property
    def mix_weight(self) -> float | None:
        """W of a ``"mix:W"`` world model, else ``None``."""
        return parse_world_model(self.world_model)

    @classmethod
    def quick(cls, **overrides) -> PerTaskConfig:
        """The README's main job: every held-out task, 5 seeds, budgets up to 32 executions
        per task, the arms ``real``, ``anchors``, ``wm``, ``wmrl`` and ``ppi`` (minutes on 2
        cores); 40 rounds on the first suite, 60 on the pool suite (its anchored arms reach
        32 executions per task)."""
        suite = overrides.get("suite", cls.suite)
        settings = dict(
            arms=("real", "anchors", "wm", "wmrl", "ppi"), rounds=60 if suite == "pool" else 40
        )
        return cls(**{**settings, **overrides})

    @classmethod
    def full(cls, **overrides) -> PerTaskConfig:
        """The headline: every arm, 6 seeds, budgets up to 64 executions per task, a wider
        rate sweep and the quality curve (world models mix:0.5 / 0.75 / 0.9 / 1); 80 rounds on
        the first suite's 39 tasks, 120 on the pool suite's 14 (one anchor group a round
        there, so the anchored arms reach 64 executions per task)."""
        suite = overrides.get("suite", cls.suite)
        settings = dict(
            seeds=6,
            rounds=120 if suite == "pool" else 80,
            budgets=(8, 16, 32, 64),
            learning_rates=(0.3, 1.0, 3.0, 10.0),
            quality_weights=(0.5, 0.75, 0.9, 1.0),
        )
        return cls(**{**settings, **overrides})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def parse_world_model(spec: str) -> float | None:
    """``"default"`` / ``"random"`` -> None; ``"mix:W"`` -> W in [0, 1].

    >>> parse_world_model("mix:0.9"), parse_world_model("default")
    (0.9, None)
    """
    if spec in ("default", "random"):
        return None
    if spec.startswith("mix:"):
        try:
            weight = float(spec[4:])
        except ValueError:
            weight = -1.0
        if 0.0 <= weight <= 1.0:
            return weight
    raise ValueError(
        f"world_model must be 'default', 'random' or 'mix:W' with W in [0, 1], got {spec!r}"
    )
