"""Prediction-powered rectification: rewards whose expectation is the real reward, for any bias.

Inverse-variance weighting cannot remove world-model bias that is not a monotone function of
the score (the bias a policy learns to exploit). Prediction-powered inference (PPI++) can:
with known inclusion probabilities ``pi_g``, world-model groups get ``x = lam * f(s)`` and
anchor groups get::

    x = r / pi_g - lam * (1 / pi_g - 1) * f_{-g}(s)

whose expectation over the anchor draw is ``r`` for every group. ``lam`` is power-tuned,
``clip(Cov(r~, f~) / Var(f~), 0, 1)`` on group-centred, cross-fitted anchor values
(``lam = 0`` uses real rewards alone, ``lam = 1`` is classic PPI).

Example:
    >>> import numpy as np
    >>> rectified_rewards(
    ...     calibrated=np.array([0.5, 0.5]), cross_fitted=np.array([0.4, 0.4]),
    ...     real=np.array([1.0, np.nan]), is_anchor=np.array([True, False]),
    ...     pi=np.array([0.5, 0.5]), lam=1.0).tolist()
    [1.6, 0.5]
"""

from __future__ import annotations

import numpy as np

from wmrl_env.fusion.groups import GroupIndex


def power_tuned_lambda(
    real: np.ndarray, cross_fitted: np.ndarray, groups: np.ndarray
) -> float | None:
    """``clip(Cov / Var, 0, 1)`` of group-centred real and cross-fitted values; ``None``
    when undefined (no within-group variation of the prediction).

    >>> power_tuned_lambda(np.array([0.0, 1.0, 0.0, 2.0]), np.array([0.0, 2.0, 0.0, 2.0]),
    ...                    np.array([0, 0, 1, 1]))
    0.75
    """
    if real.size == 0:
        return None
    index = GroupIndex.from_ids(groups)
    r = index.centre(real)
    f = index.centre(cross_fitted)
    variance = float(np.dot(f, f))
    if not variance > 0:
        return None
    return float(np.clip(np.dot(r, f) / variance, 0.0, 1.0))


def rectified_rewards(
    calibrated: np.ndarray,
    cross_fitted: np.ndarray,
    real: np.ndarray,
    is_anchor: np.ndarray,
    pi: np.ndarray,
    lam: float,
) -> np.ndarray:
    """Per-trajectory PPI rewards (NaN stays NaN for failed anchor executions)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        anchor = real / pi - lam * (1.0 / pi - 1.0) * cross_fitted
    return np.where(is_anchor, anchor, lam * calibrated)
