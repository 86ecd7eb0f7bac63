"""Choose which whole groups are executed for real, with known inclusion probabilities.

Uniform selection draws a simple random sample of ``m`` groups (``pi_g = m / M``).
Priority-driven selection (e.g. by the world model's expected error) makes ``pi_g`` grow with
each group's priority, mixed with uniform so that ``1 / pi_g`` stays bounded, and draws exactly
``m`` groups by systematic sampling over a random order, which realises every ``pi_g`` exactly.
Known ``pi_g`` is what keeps the PPI estimator unbiased.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> chosen, pi = select_anchor_groups(10, 3, rng)
    >>> int(chosen.sum()), pi.tolist() == [0.3] * 10
    (3, True)
"""

from __future__ import annotations

import math

import numpy as np

from wmrl_env.fusion.groups import GroupIndex


def num_anchor_groups(num_groups: int, fraction: float, minimum: int) -> int:
    """``round(fraction * M)``, at least ``minimum``, at most ``M``.

    >>> num_anchor_groups(64, 0.1, 1), num_anchor_groups(8, 0.1, 1), num_anchor_groups(4, 0.0, 0)
    (6, 1, 0)
    """
    return int(min(num_groups, max(minimum, math.floor(fraction * num_groups + 0.5))))


def inclusion_probabilities(
    priorities: np.ndarray, num_anchors: int, uniform_mix: float = 0.5
) -> np.ndarray:
    """Inclusion probabilities summing to ``num_anchors``, increasing with ``priorities``.

    ``pi ∝ (1 - uniform_mix) * w / mean(w) + uniform_mix``; probabilities above 1 are capped
    and the excess is spread over the others (standard PPS capping).

    >>> inclusion_probabilities(np.array([0.0, 1.0, 3.0]), 1, uniform_mix=0.5).round(3).tolist()
    [0.167, 0.292, 0.542]
    """
    w = np.asarray(priorities, dtype=np.float64)
    if w.ndim != 1 or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("priorities must be a 1-D array of finite non-negative numbers")
    if not 0.0 < uniform_mix <= 1.0:
        raise ValueError(f"uniform_mix must be in (0, 1], got {uniform_mix}")
    mean = w.mean()
    relative = w / mean if mean > 0 else np.ones_like(w)
    size = (1.0 - uniform_mix) * relative + uniform_mix
    pi = np.zeros_like(size)
    capped = np.zeros(size.shape, dtype=bool)
    for _ in range(size.shape[0]):  # converges in at most M rounds
        remaining = num_anchors - capped.sum()
        free = ~capped
        pi[free] = remaining * size[free] / size[free].sum() if free.any() else 0.0
        pi[capped] = 1.0
        over = free & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    return pi


def select_anchor_groups(
    num_groups: int,
    num_anchors: int,
    rng: np.random.Generator,
    priorities: np.ndarray | None = None,
    uniform_mix: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """Pick exactly ``num_anchors`` of ``num_groups`` groups.

    Returns ``(chosen, pi)``: a bool mask per group and each group's inclusion probability.
    """
    if not 0 <= num_anchors <= num_groups:
        raise ValueError(f"num_anchors must be in [0, {num_groups}], got {num_anchors}")
    if priorities is None:
        chosen = np.zeros(num_groups, dtype=bool)
        chosen[rng.choice(num_groups, size=num_anchors, replace=False)] = True
        return chosen, np.full(num_groups, num_anchors / num_groups)
    pi = inclusion_probabilities(priorities, num_anchors, uniform_mix)
    if pi.shape[0] != num_groups:
        raise ValueError(f"need one priority per group ({num_groups}), got {pi.shape[0]}")
    order = rng.permutation(num_groups)
    edges = np.cumsum(pi[order])
    edges[-1] = num_anchors  # absorb rounding so the last point always lands
    points = rng.uniform() + np.arange(num_anchors)
    hits = np.searchsorted(edges, points, side="right")
    chosen = np.zeros(num_groups, dtype=bool)
    chosen[order[hits]] = True
    return chosen, pi


def draw_for_method(
    method: str,
    num_groups: int,
    fraction: float,
    minimum: int,
    rng: np.random.Generator,
    priorities: np.ndarray | None = None,
    uniform_mix: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """``(chosen, pi)`` per group under ``method``: every group for ``"real"``, none for
    ``"wm"``, else :func:`select_anchor_groups` of :func:`num_anchor_groups` groups.

    >>> draw_for_method("real", 3, 0.1, 1, np.random.default_rng(0))[1].tolist()
    [1.0, 1.0, 1.0]
    """
    if method == "real":
        return np.ones(num_groups, dtype=bool), np.ones(num_groups)
    if method == "wm":
        return np.zeros(num_groups, dtype=bool), np.zeros(num_groups)
    n_anchor = num_anchor_groups(num_groups, fraction, minimum)
    return select_anchor_groups(num_groups, n_anchor, rng, priorities, uniform_mix)


def _known_mask(known: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    if known is None:
        return np.zeros(shape, dtype=bool)
    mask = np.asarray(known)
    if mask.dtype != bool or mask.shape != shape:
        raise ValueError(f"known must be a bool mask of shape {shape}")
    return mask


def uncertainty_priorities(
    group_ids: np.ndarray, wm_std: np.ndarray, known: np.ndarray | None = None
) -> np.ndarray:
    """Per-trajectory anchor priorities from the world model's predictive std: each group's
    expected absolute error ``E|r - s| = sqrt(2 / pi) * sqrt(mean_g std^2)`` (Gaussian
    predictive distribution), constant within the group. A non-finite std (an invalid
    prediction) counts as the batch's largest finite one. Members in ``known`` (outcomes
    known without execution, per trajectory) are left out: nothing is learnt from them; a
    group of known members only has priority 0.

    >>> uncertainty_priorities(np.array([0, 0, 1, 1]), np.array([0.1, 0.1, 0.3, np.nan])).round(3)
    array([0.08 , 0.08 , 0.239, 0.239])
    >>> known = np.array([False, False, False, True])
    >>> uncertainty_priorities(np.array([0, 0, 1, 1]), np.array([0.1, 0.1, 0.3, np.nan]),
    ...                        known).round(3)
    array([0.08 , 0.08 , 0.239, 0.239])
    >>> uncertainty_priorities(np.array([0, 0, 1, 1]), np.array([0.1, 0.1, 0.3, 9.0]),
    ...                        known).round(3)
    array([0.08 , 0.08 , 0.239, 0.239])
    """
    groups = GroupIndex.from_ids(group_ids)
    std = np.asarray(wm_std, dtype=np.float64)
    if std.shape != groups.inverse.shape:
        raise ValueError(f"wm_std has shape {std.shape}, expected {groups.inverse.shape}")
    unknown = ~_known_mask(known, std.shape)
    finite = np.isfinite(std)
    if (std[finite] < 0).any():
        raise ValueError("wm_std must be non-negative")
    fill = float(std[finite & unknown].max()) if (finite & unknown).any() else 1.0
    std = np.where(finite, std, fill)
    mean_square = groups.mean(np.where(unknown, std**2, 0.0), unknown)
    mean_square = np.where(groups.count(unknown) > 0, mean_square, 0.0)
    return groups.broadcast(math.sqrt(2.0 / math.pi) * np.sqrt(mean_square))


def ucb_priorities(
    group_ids: np.ndarray,
    wm_scores: np.ndarray,
    wm_std: np.ndarray | None = None,
    kappa: float = 1.0,
    reference: np.ndarray | None = None,
    known: np.ndarray | None = None,
) -> np.ndarray:
    """Per-trajectory anchor priorities from the upper bound of each group's world-model
    scores: ``U_g = max_i (s_i + kappa * std_i)``, the most a member of the group may score.
    A group's priority is how far ``U_g`` rises above its ``reference`` (per trajectory,
    constant within a group: e.g. the best real score already found in the group's context;
    NaN: none known), ``max(U_g - reference_g, 0)``; a group without a reference is measured
    from the batch's lowest ``U``. Constant within the group, ``>= 0``: a PPS priority.

    Non-finite scores (invalid predictions, anchored anyway) are left out of ``U_g``; a group
    with none left gets the batch's largest ``U``. A non-finite std counts as the batch's
    largest finite one; ``wm_std=None`` (a world model without a std) is 0. Members in
    ``known`` (outcomes known without execution) are left out of ``U_g`` too; a group of
    known members only has priority 0.

    >>> ids = np.array([0, 0, 1, 1, 2, 2])
    >>> s, sd = np.array([0.5, 0.7, 0.9, 0.2, 0.4, 0.4]), np.full(6, 0.1)
    >>> ucb_priorities(ids, s, sd).round(3).tolist()
    [0.3, 0.3, 0.5, 0.5, 0.0, 0.0]
    >>> ucb_priorities(ids, s, sd, reference=np.array([1, 1, 0.5, 0.5, np.nan, np.nan])).tolist()
    [0.0, 0.0, 0.5, 0.5, 0.0, 0.0]
    """
    groups = GroupIndex.from_ids(group_ids)
    n = groups.inverse.shape
    scores = np.asarray(wm_scores, dtype=np.float64)
    if scores.shape != n:
        raise ValueError(f"wm_scores has shape {scores.shape}, expected {n}")
    if not (math.isfinite(kappa) and kappa >= 0):
        raise ValueError(f"kappa must be a finite number >= 0, got {kappa}")
    std = np.zeros(n) if wm_std is None else np.asarray(wm_std, dtype=np.float64)
    if std.shape != n:
        raise ValueError(f"wm_std has shape {std.shape}, expected {n}")
    finite_std = np.isfinite(std)
    if (std[finite_std] < 0).any():
        raise ValueError("wm_std must be non-negative")
    std = np.where(finite_std, std, std[finite_std].max() if finite_std.any() else 0.0)
    unknown = ~_known_mask(known, n)
    upper = np.where(np.isfinite(scores) & unknown, scores + kappa * std, -np.inf)
    per_group = np.full(groups.num_groups, -np.inf)
    np.maximum.at(per_group, groups.inverse, upper)
    finite = np.isfinite(per_group)
    if not finite.any():
        return np.zeros(n)
    all_known = groups.count(unknown) == 0
    per_group[~finite] = per_group[finite].max()
    base = np.full(groups.num_groups, per_group.min())
    if reference is not None:
        ref = np.asarray(reference, dtype=np.float64)
        if ref.shape != n:
            raise ValueError(f"reference has shape {ref.shape}, expected {n}")
        ref_group = groups.mean(np.nan_to_num(ref, nan=0.0, posinf=0.0, neginf=0.0))
        has_ref = groups.count(np.isfinite(ref)) == groups.sizes
        base = np.where(has_ref, ref_group, base)
    return groups.broadcast(np.where(all_known, 0.0, np.maximum(per_group - base, 0.0)))
