"""World-model screening inside anchor groups: execute ``k`` of a group's ``G`` members.

A group of ``G`` candidates is sampled; the world model scores all of them, and only ``k``
are executed for real, chosen by their upper bound ``u_i = s_i + kappa * std_i``:

* ``"pps"``: ``k`` members drawn by systematic PPS within the group, ``pi_{i|g}``
  increasing with ``u_i - min_g u`` and mixed with uniform (every ``pi_{i|g} > 0``, they
  sum to ``k``); each member's probability of execution is ``pi_g * pi_{i|g}`` exactly, so
  the Horvitz-Thompson / PPI correction ``r / pi - lam (1 / pi - 1) f`` stays unbiased for
  every member's real reward, and so does the group mean and every group-centred advantage;
* ``"top"``: the ``k`` highest upper bounds (ties at random): a deterministic selection by
  the world model. The members left out have ``pi_{i|g} = 0``: nothing corrects their
  world-model score, so no estimator of the group mean is unbiased (``ppi`` refuses it); it
  executes what the world model ranks best, which is what search wants.

Example:
    >>> rng = np.random.default_rng(0)
    >>> ids = np.repeat([0, 1], 4)
    >>> upper = np.array([0.1, 0.9, 0.5, 0.3, 0.2, 0.2, 0.8, 0.7])
    >>> executed, pi = screen_members(ids, upper, 2, rng, how="top")
    >>> executed.astype(int).tolist(), pi.tolist()
    ([0, 1, 1, 0, 0, 0, 1, 1], [0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    >>> executed, pi = screen_members(ids, upper, 2, rng, how="pps")
    >>> int(executed.sum()), round(float(pi[:4].sum()), 6), bool((pi > 0).all())
    (4, 2.0, True)
"""

from __future__ import annotations

import numpy as np

from wmrl_env.fusion.anchors import select_anchor_groups
from wmrl_env.fusion.groups import GroupIndex

SCREENINGS: tuple[str, ...] = ("pps", "top")


def screen_members(
    group_ids: np.ndarray,
    upper: np.ndarray,
    keep: int,
    rng: np.random.Generator,
    how: str = "pps",
    uniform_mix: float = 0.5,
    known: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Choose ``keep`` members of every group to execute, by their upper bound ``upper``.

    Returns ``(executed, member_pi)`` per trajectory: the choice and each member's
    conditional probability of execution given its group is an anchor (``pi_{i|g}``; 1 for
    every member of a group of at most ``keep``). A group holding a non-finite ``upper``
    (an invalid prediction, which must be executed) is executed whole, ``pi_{i|g} = 1``.

    ``known`` (optional, per trajectory): members whose outcome is known without execution
    (e.g. a program that does not parse). They are never executed (``member_pi`` 1: their
    reward is their outcome, no probability enters it) and take no part in the choice: the
    ``keep`` members come from the others, and a known member's non-finite ``upper`` does
    not make its group execute whole.
    """
    if how not in SCREENINGS:
        raise ValueError(f"screening must be one of {SCREENINGS}, got {how!r}")
    if isinstance(keep, bool) or not isinstance(keep, (int, np.integer)) or keep < 1:
        raise ValueError(f"members to execute per group must be an int >= 1, got {keep!r}")
    groups = GroupIndex.from_ids(group_ids)
    values = np.asarray(upper, dtype=np.float64)
    if values.shape != groups.inverse.shape:
        raise ValueError(f"upper has shape {values.shape}, expected {groups.inverse.shape}")
    is_known = np.zeros(values.shape, dtype=bool)
    if known is not None:
        is_known = np.asarray(known)
        if is_known.dtype != bool or is_known.shape != values.shape:
            raise ValueError(f"known must be a bool mask of shape {values.shape}")
    executed = np.zeros(values.shape, dtype=bool)
    member_pi = np.ones(values.shape)  # known members keep 1
    order = np.argsort(groups.inverse, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(groups.sizes)])
    for g in range(groups.num_groups):
        members = order[bounds[g] : bounds[g + 1]]
        members = members[~is_known[members]]
        if not members.size:
            continue
        u = values[members]
        if members.size <= keep or not np.isfinite(u).all():
            executed[members], member_pi[members] = True, 1.0
            continue
        if how == "top":
            shuffled = rng.permutation(members.size)  # ties broken at random
            best = shuffled[np.argsort(-u[shuffled], kind="stable")[:keep]]
            member_pi[members] = 0.0
            executed[members[best]], member_pi[members[best]] = True, 1.0
            continue
        priority = u - u.min()
        chosen, pi = select_anchor_groups(members.size, keep, rng, priority, uniform_mix)
        executed[members], member_pi[members] = chosen, pi
    return executed, member_pi
