"""How much the world model's std says about its errors, learnt from the anchors.

The gate's slope (:class:`~wmrl_env.fusion.gate.WorldModelGate`) can be fitted by weighted
least squares, each anchor pair weighed by its relative precision ``(median sigma^2 /
sigma_i^2) ** beta`` (``sigma``: the world model's predictive std, :func:`precision_weights`).
``beta = 1`` is plain inverse-variance weighting, right when the std is the error's; with an
uninformative std (constant or random) any weighting only costs power. So ``beta`` is learnt:
:class:`StdExponent` regresses the log squared residuals of earlier anchor pairs on their log
relative variance (``log e^2 = c + beta log q + noise``, robust to heavy tails), pooled over
the run with the gate's decay, and clips the slope to ``[0, 1]``. Every weight used for a
step's evidence is fixed before that step's draw (the exponent comes from earlier steps, the
std from the prediction), so PPI stays unbiased.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> exponent = StdExponent()
    >>> for _ in range(20):  # the std is the errors' own: beta near 1
    ...     std = rng.lognormal(0.0, 0.8, 16)
    ...     exponent.update(std, std * rng.normal(size=16))
    >>> 0.8 < exponent.beta <= 1.0
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

PRECISION_CAP = 10.0  # the largest precision weight, relative to the step's median
MIN_PAIRS = 32  # pooled pairs (decayed) before beta leaves 0
_TINY = 1e-300


def relative_variance(std: np.ndarray) -> np.ndarray:
    """``sigma^2`` over its median along the last axis (one step's pairs); 1 where the median
    is 0."""
    variance = np.asarray(std, dtype=np.float64) ** 2
    median = np.median(variance, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(median > 0, variance / median, 1.0)


def precision_weights(std: np.ndarray, beta: float | np.ndarray = 1.0) -> np.ndarray:
    """Relative precisions ``q ** -beta`` (``q``: :func:`relative_variance`) of one step's
    pairs, capped at :data:`PRECISION_CAP` (a near-zero std cannot take over the slope).
    ``beta`` may be an array broadcast against the leading axes (one per run).

    >>> precision_weights(np.array([1.0, 2.0, 0.5, 0.0, 1.0])).tolist()
    [1.0, 0.25, 4.0, 10.0, 1.0]
    >>> precision_weights(np.array([1.0, 2.0]), beta=0.0).tolist()
    [1.0, 1.0]
    """
    q = np.maximum(relative_variance(std), _TINY)
    beta = np.asarray(beta, dtype=np.float64)
    if beta.ndim:
        beta = beta.reshape(beta.shape + (1,) * (q.ndim - beta.ndim))
    return np.minimum(q**-beta, PRECISION_CAP)


def exponent_sums(std: np.ndarray, residuals: np.ndarray) -> np.ndarray:
    """One step's sums for :func:`exponent_from_sums` along the last axis: ``n``,
    ``sum x``, ``sum x^2``, ``sum y``, ``sum x y`` of ``x = log q``, ``y = log e^2``
    (pairs with ``e = 0`` or ``sigma = 0`` left out)."""
    q = relative_variance(std)
    e2 = np.asarray(residuals, dtype=np.float64) ** 2
    usable = (q > 0) & (e2 > 0)
    with np.errstate(divide="ignore"):
        x = np.where(usable, np.log(np.where(usable, q, 1.0)), 0.0)
        y = np.where(usable, np.log(np.where(usable, e2, 1.0)), 0.0)
    return np.stack(
        [usable.sum(-1), x.sum(-1), (x * x).sum(-1), y.sum(-1), (x * y).sum(-1)], axis=-1
    ).astype(np.float64)


def exponent_from_sums(sums: np.ndarray) -> np.ndarray:
    """``beta = clip(slope of y on x, 0, 1)`` from pooled :func:`exponent_sums` (last axis);
    0 with fewer than :data:`MIN_PAIRS` pairs or no spread in ``x``."""
    n, sx, sxx, sy, sxy = np.moveaxis(np.asarray(sums, dtype=np.float64), -1, 0)
    spread = n * sxx - sx * sx
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (n * sxy - sx * sy) / spread
    ok = (n >= MIN_PAIRS) & (spread > 1e-12 * np.maximum(n * n, 1.0)) & np.isfinite(slope)
    return np.where(ok, np.clip(slope, 0.0, 1.0), 0.0)


class StdExponent:
    """The pooled, decayed regression behind ``beta`` (see the module docstring).

    Args:
        decay: weight of a step's pairs per step of age (the gate's ``decay``).
    """

    def __init__(self, decay: float = 0.95) -> None:
        self.decay = decay
        self._sums = np.zeros(5)

    @property
    def beta(self) -> float:
        """The exponent the next step's weights use."""
        return float(exponent_from_sums(self._sums))

    def update(self, std: np.ndarray, residuals: np.ndarray) -> None:
        """Age the pool and add one step's pairs (std and residual of each)."""
        self._sums *= self.decay
        if np.size(std):
            self._sums += exponent_sums(std, residuals)

    def state_dict(self) -> dict[str, Any]:
        return {"sums": self._sums.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._sums = np.array(state["sums"], dtype=np.float64)
