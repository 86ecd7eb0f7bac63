"""The configuration of ``wmrl bench``: one dataclass, reused by the command line.

Example:
    >>> quick = BenchConfig.quick()
    >>> quick.arms[:2], quick.seeds >= 3, quick.live_check > 0
    (('real', 'anchors'), True, True)
    >>> BenchConfig.full().seeds
    5
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from wmrl_env.fusion import METHODS

ANCHORS_ARM = "anchors"
"""GRPO on the anchor groups alone: as many real groups a round as a fused arm executes,
all real, no world model (the baseline that says whether the world model adds anything)"""
ARMS: tuple[str, ...] = ("real", ANCHORS_ARM, *(m for m in METHODS if m != "real"))
FUSED_ARMS: tuple[str, ...] = ("debias", "denoise", "wmrl", "ppi")
WORLD_MODELS: tuple[str, ...] = ("default", "random")


@dataclass
class BenchConfig:
    """What ``wmrl bench`` trains and measures.

    One policy conditioned on the task (features of the task an agent sees) over the
    72-program space is post-trained with GRPO on the suite's ``train`` split (each round
    draws ``num_groups`` tasks, one group of ``group_size`` programs per task) and scored on
    the ``heldout`` split from the execution table, never charged.
    """

    arms: tuple[str, ...] = ARMS
    """arms to compare: "real" (every group executed), "anchors" (only the fused arms' share
    of groups, all executed, no world model), and the fusion methods"""
    seeds: int = 3
    """independent runs per arm"""
    iterations: int = 40
    """GRPO rounds per run"""
    num_groups: int = 10
    """groups (tasks drawn from the train split) per round"""
    group_size: int = 8
    """programs sampled per group"""
    anchor_fraction: float = 0.2
    """share of groups executed for real (at least one group per round)"""
    train_tasks: int = 0
    """train on a fixed sample of this many tasks of the train split (0: all of them)"""
    heldout_tasks: int = 0
    """score on a fixed sample of this many tasks of the held-out split (0: all of them)"""
    world_model: Literal["default", "random"] = "default"
    """"default": the package's default world model for ML programs, pretrained on the
    suite's ``wm`` split; "random": uniform random scores (the useless world model of the
    never-worse check)"""
    uncertainty_anchors: bool = False
    """fused arms draw their anchor groups with probabilities that grow with the world
    model's predicted error (its std), not uniformly; the anchors arm is unaffected"""
    heldout_score: Literal["greedy", "expected"] = "greedy"
    """how the policy is scored on a held-out task: its most likely program's table score,
    or the mean table score under its program distribution"""
    executor: Literal["live", "replay"] = "replay"
    """"replay": the committed execution table (every reward a recorded real execution,
    charged its recorded seconds); "live": the local sandbox (results cached across arms and
    seeds, hits charged the seconds of their first run)"""
    live_check: int = 0
    """after training, execute the final greedy programs of this many held-out tasks live in
    the sandbox and compare each score with the table's (0: none)"""
    eval_every: int = 2
    """score the policy on the held-out split every this many rounds"""
    learning_rate: float = 0.02
    """learning rate of the policy, the same for every arm: with Adam, 0.02 suits the
    ``anchors`` arm (at 0.05 it trains badly and every fused arm, even with a random world
    model, seems to beat it; docs/benchmarks.md has the sweep)"""
    optimizer: Literal["adam", "sgd"] = "adam"
    """the policy's optimizer: "adam" (the default; it moves each weight by about
    ``learning_rate`` a step whatever the batch, so arms compare at equal steps) or "sgd"
    (plain gradient steps: a step's size follows the advantages' size; choose its rate
    anew, it is not Adam's)"""
    update_epochs: int = 2
    """gradient steps per round"""
    hidden: int = 0
    """width of the policy's hidden layers (0: a linear map from task features to the 72
    program logits)"""
    tolerance: float = 0.01
    """the speedup target is the real arm's final score minus this"""
    workers: int = 2
    """sandbox programs run at once (live executor and live check)"""
    out: str | None = None
    """output folder; default runs/bench-<time>"""
    cache_dir: str = "runs/.exec-cache"
    """result cache of the live executor"""

    def __post_init__(self) -> None:
        self.arms = tuple(self.arms)
        unknown = set(self.arms) - set(ARMS)
        if unknown:
            raise ValueError(f"unknown arms {sorted(unknown)}; choose from {ARMS}")
        if not self.arms:
            raise ValueError("give at least one arm")
        for name, allowed in (
            ("executor", ("live", "replay")),
            ("world_model", WORLD_MODELS),
            ("heldout_score", ("greedy", "expected")),
            ("optimizer", ("adam", "sgd")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("seeds", "iterations", "num_groups", "group_size", "eval_every", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        for name in ("live_check", "hidden", "train_tasks", "heldout_tasks"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0.0 < self.anchor_fraction <= 1.0:
            raise ValueError("anchor_fraction must be in (0, 1]")
        if not self.learning_rate > 0:
            raise ValueError("learning_rate must be positive")

    @classmethod
    def quick(cls, **overrides) -> BenchConfig:
        """The README's main job: replay, small batches, 3 seeds, and a live check of a few
        final programs (minutes on 2 cores)."""
        settings = dict(iterations=30, num_groups=8, anchor_fraction=0.25, live_check=3)
        return cls(**{**settings, **overrides})

    @classmethod
    def full(cls, **overrides) -> BenchConfig:
        """The headline configuration: bigger batches, more rounds, 5 seeds, replay."""
        settings = dict(seeds=5, iterations=60, num_groups=20, group_size=8, anchor_fraction=0.1)
        return cls(**{**settings, **overrides})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
