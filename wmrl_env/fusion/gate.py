"""The world model's weight ``lam``: zero unless the anchors give clear evidence that it helps.

The policy gradient from a world-model group is ``sum_i f~_i grad log p_i`` (``f~``: the
calibrated score centred in its group). PPI's estimator of the all-real gradient,
``lam * f~`` on world-model groups and ``(r~ - lam f~) / pi + lam f~`` on anchors, has
draw variance ``(1/pi - 1) * sum_g (r~_g - lam f~_g)^2``: minimal at the regression slope
``lam* = sum r~ f~ / sum f~^2`` and no worse than ignoring the world model (``lam = 0``,
GRPO on the anchors alone) for any ``lam`` in ``[0, 2 lam*]``. The same slope is the best
linear predictor of a real centred reward from a calibrated one, which is how ``wmrl`` shrinks
its world-model groups.

A per-step estimate from two anchor groups swings between 0 and 1 even for a useless model.
:class:`WorldModelGate` pools the per-group sums of the last ``window`` steps, estimates the
slope with a cluster-robust standard error (clusters: groups, so a world model that is good
on some tasks and bad on others counts each task once) and uses its one-sided lower
confidence bound ``clip(lam_hat - t_{1-alpha, K-1} * se, 0, 1)``: ``lam <= lam*`` with
probability ``1 - alpha``, so the weight is 0 for a useless model and near ``lam*`` for a good
one. The weight used at a step comes from earlier steps only, so it is independent of that
step's anchor draw and PPI stays exactly unbiased.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> gate = WorldModelGate(window=16)
    >>> for _ in range(16):
    ...     f = rng.normal(size=16)
    ...     _ = gate.update(0.8 * f + 0.3 * rng.normal(size=16), f, np.repeat([0, 1], 8))
    >>> 0.7 < gate.weight <= gate.estimate < 0.9
    True
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from wmrl_env.fusion.groups import GroupIndex


class WorldModelGate:
    """Pooled, confidence-bounded regression slope of real on calibrated centred scores.

    Args:
        window: steps of anchor groups pooled.
        alpha: one-sided level of the lower confidence bound (smaller: more evidence needed).
    """

    def __init__(self, window: int = 16, alpha: float = 0.05) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
        self.window = window
        self.alpha = alpha
        self._steps: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=window)
        self.estimate = float("nan")  # the pooled slope lam_hat
        self.standard_error = float("nan")
        self.weight = 0.0  # the lower confidence bound, clipped to [0, 1]

    @property
    def num_groups(self) -> int:
        """Anchor groups pooled."""
        return sum(sxy.size for sxy, _ in self._steps)

    def update(self, real: np.ndarray, calibrated: np.ndarray, groups: np.ndarray) -> float:
        """Add one step's anchor pairs (cross-fitted calibrated scores); returns the new weight.

        A step with no usable group still ages the window.
        """
        sxy = sxx = np.empty(0)
        if real.size:
            index = GroupIndex.from_ids(groups)
            r, f = index.centre(real), index.centre(calibrated)
            sxy, sxx = index.sum(r * f), index.sum(f * f)
            informative = (index.sizes > 1) & (sxx > 0)
            sxy, sxx = sxy[informative], sxx[informative]
        self._steps.append((sxy, sxx))
        self._refresh()
        return self.weight

    def _refresh(self) -> None:
        sxy = np.concatenate([np.empty(0), *(s for s, _ in self._steps)])
        sxx = np.concatenate([np.empty(0), *(s for _, s in self._steps)])
        k = sxy.size
        total = float(sxx.sum())
        if k < 2 or not total > 0:
            self.estimate, self.standard_error, self.weight = float("nan"), float("nan"), 0.0
            return
        slope = float(sxy.sum()) / total
        scores = sxy - slope * sxx  # per-cluster score of the least-squares equation
        se = float(np.sqrt(k / (k - 1) * np.dot(scores, scores)) / total)
        bound = slope - float(student_t.ppf(1.0 - self.alpha, k - 1)) * se
        self.estimate, self.standard_error = slope, se
        self.weight = float(np.clip(bound, 0.0, 1.0))

    def state_dict(self) -> dict[str, Any]:
        return {"steps": [(a.copy(), b.copy()) for a, b in self._steps]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._steps = deque(
            (
                (np.array(a, dtype=np.float64), np.array(b, dtype=np.float64))
                for a, b in state["steps"]
            ),
            maxlen=self.window,
        )
        self._refresh()
