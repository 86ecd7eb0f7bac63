"""The configuration of ``wmrl bench``: one dataclass, reused by the command line.

Example:
    >>> quick = BenchConfig.quick()
    >>> quick.executor, quick.arms[0], len(quick.tasks) < len(BenchConfig.full().tasks)
    ('live', 'real', True)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from wmrl_env.fusion import METHODS

ARMS: tuple[str, ...] = METHODS  # real, wm, debias, denoise, wmrl, ppi
HELDOUT = ("wine", "diabetes", "anes96", "engel", "sunspots", "synth_friedman1_s0")
QUICK_TASKS = ("wine", "diabetes")  # the held-out tasks with the quickest programs


@dataclass
class BenchConfig:
    """What ``wmrl bench`` trains and measures.

    The policy (a per-task softmax over the structured program space) is trained with GRPO on
    held-out tasks of the ML task suite, once per arm and seed; the world model is the
    embedding regressor fitted on the train tasks' execution table.
    """

    arms: tuple[str, ...] = ARMS
    """fusion methods to compare; "real" is the baseline the speedup is measured against"""
    seeds: int = 2
    """independent runs per arm"""
    iterations: int = 10
    """GRPO rounds per run"""
    num_groups: int = 4
    """groups (tasks) per round"""
    group_size: int = 4
    """programs sampled per group"""
    anchor_fraction: float = 0.1
    """share of groups executed for real (at least one group per round)"""
    tasks: tuple[str, ...] = QUICK_TASKS
    """held-out tasks the policy is trained on"""
    executor: Literal["live", "replay"] = "live"
    """"live": programs run in the local sandbox (results cached across arms and seeds, hits
    charged the seconds of their first run); "replay": the committed execution table"""
    true_score: Literal["table", "live"] = "table"
    """how the greedy policy's true score is measured: "table" looks the program up in the
    committed execution table (every program's real score; a live run of the same program
    gives the same score bit for bit, ``tests/bench`` checks a sample), "live" executes it
    with the run's executor. Never charged to the arm"""
    eval_every: int = 2
    """evaluate the greedy policy every this many rounds"""
    learning_rate: float = 0.2
    """Adam learning rate of the policy"""
    update_epochs: int = 4
    """gradient steps per round"""
    tolerance: float = 0.01
    """the speedup target is the real arm's final score minus this (1 % of the normalised
    score range: two arms that settle on equally good programs both reach it)"""
    workers: int = 2
    """sandbox programs run at once (live executor)"""
    out: str | None = None
    """output folder; default runs/bench-<time>"""
    cache_dir: str = "runs/.exec-cache"
    """result cache of the live executor"""

    def __post_init__(self) -> None:
        unknown = set(self.arms) - set(ARMS)
        if unknown:
            raise ValueError(f"unknown arms {sorted(unknown)}; choose from {ARMS}")
        if self.executor not in ("live", "replay"):
            raise ValueError(f"executor must be 'live' or 'replay', got {self.executor!r}")
        if self.true_score not in ("table", "live"):
            raise ValueError(f"true_score must be 'table' or 'live', got {self.true_score!r}")
        for name in ("seeds", "iterations", "num_groups", "group_size", "eval_every", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if not 0.0 <= self.anchor_fraction <= 1.0:
            raise ValueError("anchor_fraction must be in [0, 1]")
        if not self.tasks:
            raise ValueError("give at least one task")

    @classmethod
    def quick(cls, **overrides) -> BenchConfig:
        """Under 5 minutes on 2 cores with live execution (4.5 measured): the README's main job."""
        return cls(**overrides)

    @classmethod
    def full(cls, **overrides) -> BenchConfig:
        """The headline configuration: every held-out task, bigger batches, more seeds."""
        settings = dict(
            seeds=5, iterations=40, num_groups=20, group_size=8, tasks=HELDOUT, eval_every=2
        )
        return cls(**{**settings, **overrides})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
