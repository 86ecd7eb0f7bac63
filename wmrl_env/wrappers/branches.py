"""Groups that start from real states of earlier real episodes and play a short horizon.

A dynamics world model is most wrong far from the data it saw, and an episode imagined from
the group start drifts further from the real one with every step. With
:class:`BranchStarts`, every round of a
:class:`~wmrl_env.WorldModelVectorEnv` after the first starts ``groups`` of its groups (the
last ones) from real states that the real episodes of the last ``keep_rounds`` rounds visited
(drawn uniformly among them, each with its exact snapshot) and plays them on to the
episode's step limit (a state ``a`` steps into its episode leaves ``max_episode_steps - a``),
or for at most ``horizon`` steps; the other groups start fresh and play whole
episodes. The world model then imagines short pieces from where the current policy really
goes (as in MBPO's branched rollouts), and a branched group drawn as an anchor plays its piece
in the real env, restored bit for bit from the snapshot, so the fusion's calibration and gate
see branched pairs too. Anchors are drawn as without branches (uniformly over all groups).

The env must offer ``get_snapshot`` / ``restore_snapshot`` (the vector env refuses one that
does not). Per env, ``info["start_age"]`` says how many steps into its episode the group's
start is (0: a fresh start).

Example:
    >>> import numpy as np
    >>> from wmrl_env.wrappers.starts import GroupStarts
    >>> branch = BranchStarts(groups=1, horizon=3, seed=0)
    >>> fresh = GroupStarts(np.array([7, 8]), [np.zeros(2), np.zeros(2)], [{}, {}], [None, None],
    ...                     None)
    >>> branch.plan(fresh, max_episode_steps=10).horizons.tolist()  # nothing recorded yet
    [10, 10]
    >>> branch.end_round([RealState(np.ones(2), {"t": 8}, age=8)])
    >>> plan = branch.plan(fresh, max_episode_steps=10)
    >>> plan.horizons.tolist(), plan.ages.tolist(), plan.starts.snapshots[1]
    ([10, 2], [0, 8], {'t': 8})
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from wmrl_env.wrappers.starts import GroupStarts

__all__ = ["BranchPlan", "BranchStarts", "RealState"]


@dataclass(frozen=True)
class RealState:
    """A state a real episode visited: what it showed, its exact snapshot, and how many steps
    into its episode it is."""

    observation: Any
    snapshot: Any
    age: int


@dataclass(frozen=True)
class BranchPlan:
    """A round's group starts (branched ones replaced), and per group its start's age and
    the steps it plays."""

    starts: GroupStarts
    ages: np.ndarray
    horizons: np.ndarray


class BranchStarts:
    """Start ``groups`` groups of each round from recorded real states; see the module.

    Args:
        groups: groups per round started from recorded real states (the last ones).
        horizon: most steps a branched group plays (``None``: on to its episode's step limit,
            whose remaining steps are the horizon).
        keep_rounds: rounds of recorded states to draw from (1: the last round's only, the
            current policy's; more: a wider spread of states, from slightly older policies).
        seed: seeds which recorded states are drawn.
    """

    def __init__(
        self, groups: int, horizon: int | None = None, keep_rounds: int = 1, seed: int = 0
    ) -> None:
        if groups < 1 or (horizon is not None and horizon < 1) or keep_rounds < 1:
            raise ValueError(
                f"groups, horizon and keep_rounds must be >= 1, got {groups}, {horizon}, "
                f"{keep_rounds}"
            )
        self.groups = int(groups)
        self.horizon = None if horizon is None else int(horizon)
        self._rounds: deque[list[RealState]] = deque(maxlen=int(keep_rounds))
        self._rng = np.random.default_rng([int(seed), 0xB4A])

    @property
    def states(self) -> list[RealState]:
        """The recorded states branched groups are drawn from."""
        return [state for states in self._rounds for state in states]

    def end_round(self, states: Iterable[RealState]) -> None:
        """Make the real states of the round that ended drawable (a round that reached none
        leaves the earlier ones in place)."""
        states = list(states)
        if states:
            self._rounds.append(states)

    def plan(self, starts: GroupStarts, max_episode_steps: int) -> BranchPlan:
        """``starts`` with the last ``groups`` groups moved to recorded real states that
        leave at least one step (all fresh while none is recorded)."""
        num_groups = len(starts.observations)
        if self.groups > num_groups:
            raise ValueError(f"BranchStarts(groups={self.groups}) but the round has {num_groups}")
        ages = np.zeros(num_groups, dtype=np.int64)
        horizons = np.full(num_groups, int(max_episode_steps), dtype=np.int64)
        pool = [s for s in self.states if s.age < max_episode_steps]
        if not pool:
            return BranchPlan(starts, ages, horizons)
        observations, infos, snapshots = (
            list(starts.observations),
            list(starts.infos),
            list(starts.snapshots),
        )
        for group in range(num_groups - self.groups, num_groups):
            state = pool[int(self._rng.integers(len(pool)))]
            observations[group], snapshots[group], infos[group] = (
                state.observation,
                state.snapshot,
                {},
            )
            ages[group] = state.age
            left = int(max_episode_steps) - state.age
            horizons[group] = left if self.horizon is None else min(self.horizon, left)
        branched = replace(starts, observations=observations, infos=infos, snapshots=snapshots)
        return BranchPlan(branched, ages, horizons)
