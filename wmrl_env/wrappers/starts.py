"""Group starts: one real reset per group, and the recipe every member uses to start the same.

The GRPO group invariant: all members of a group start from the same task / initial state.
Each group gets one seed; its start is reset once through the executor (cheap: it yields the
task context or the initial state). When the env offers ``get_snapshot`` /
``restore_snapshot`` the exact state is captured there and every real member later restores
it; otherwise every member resets with the group's seed, which is enough for envs whose reset
is reproducible (gymnasium's contract, checked by ``check_env``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.utils.env_checker import data_equivalence

from wmrl_env.env_executors.gym_env import EnvJob, GymEnvExecutor
from wmrl_env.executors.base import ExecResult

__all__ = ["GroupStarts", "check_same_starts", "reset_groups"]


@dataclass(frozen=True)
class GroupStarts:
    """How each group starts: its seed, observation, info and (optional) exact snapshot."""

    seeds: np.ndarray
    observations: list[Any]
    infos: list[dict[str, Any]]
    snapshots: list[Any]
    options: Mapping[str, Any] | None

    def job(
        self, group: int, actions: Sequence[Any] = (), slot: int | None = None, **tags: Any
    ) -> EnvJob:
        """A job starting a member of ``group`` exactly like the group, then playing ``actions``."""
        return EnvJob(
            actions=tuple(actions),
            seed=int(self.seeds[group]),
            options=self.options,
            snapshot=self.snapshots[group],
            slot=slot,
            tags={"group": group, **tags},
        )


def reset_groups(
    executor: GymEnvExecutor,
    seeds: np.ndarray,
    options: Mapping[str, Any] | None,
    capture_snapshots: bool,
) -> GroupStarts:
    """Reset one real env per group (concurrently); raise if any reset fails (no start, no task)."""
    jobs = [
        EnvJob(
            seed=int(seed), options=options, capture_snapshot=capture_snapshots, tags={"group": g}
        )
        for g, seed in enumerate(seeds)
    ]
    results = executor.run(jobs)
    failed = [(g, r) for g, r in enumerate(results) if not r.ok]
    if failed:
        group, result = failed[0]
        raise RuntimeError(
            f"resetting the real env failed for {len(failed)} of {len(jobs)} groups; group "
            f"{group}: {result.status}: {result.message}"
        )
    return GroupStarts(
        seeds=np.asarray(seeds),
        observations=[r.metadata["start_observation"] for r in results],
        infos=[dict(r.metadata.get("info") or {}) for r in results],
        snapshots=[r.metadata.get("snapshot") for r in results],
        options=options,
    )


def check_same_starts(
    starts: GroupStarts, groups: Sequence[int], results: Sequence[ExecResult]
) -> int:
    """Count real members whose start differs from their group's; warn when any does.

    A mismatch means ``reset(seed)`` is not reproducible for this env, so the members of a
    group did not start identically: give the env ``get_snapshot`` / ``restore_snapshot``.
    """
    mismatches = 0
    for group, result in zip(groups, results, strict=True):
        if "start_observation" not in result.metadata:
            continue
        expected = starts.observations[group]
        if not data_equivalence(result.metadata["start_observation"], expected, exact=True):
            mismatches += 1
    if mismatches:
        warnings.warn(
            f"{mismatches} real member(s) did not start like their group: the env's "
            "reset(seed) is not reproducible, so group members differ. Give the env "
            "get_snapshot() and restore_snapshot(snapshot) -> (obs, info) to fix this.",
            RuntimeWarning,
            stacklevel=3,
        )
    return mismatches
