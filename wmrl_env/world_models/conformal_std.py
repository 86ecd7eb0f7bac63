"""Split-conformal scaling of a model's raw spread into a std that covers what it says.

A language model's score-token distribution has a spread, but nothing makes ``mean +- spread``
cover the real score 68 % of the time. :class:`ConformalStd` keeps a window of held-out
residuals ``|real - predicted|`` with the raw spread the model gave each, and picks one scale
``c`` and one floor ``f`` (from a small grid) so that ``std = c * sqrt(spread**2 + f**2)``
makes ``+-1 std`` and ``+-1.96 std`` cover 68.3 % and 95 % of those residuals as nearly as one
std can (the larger of the two coverage errors is minimised: :func:`coverage_scale`, which world
models v2 and v3 use too). The floor keeps a confidently wrong model (spread near 0) from
claiming certainty.

"Held-out" means the model never trained on the pair: the LM scorers keep a share of their
anchors out of training (:func:`held_out_mask`, by a hash of the prompt, so a repeated program
stays on its side) plus any pairs given to
:meth:`~wmrl_env.world_models.lm.prompting.PromptScorer.calibrate`, and recompute their residuals
under the current model after every update, so calibration and prediction see the same model.
Until ``min_residuals`` residuals are in the window the raw spread passes unchanged.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> spread = rng.uniform(0.05, 0.2, size=2000)
    >>> residual = np.abs(rng.normal(0.0, 3.0 * spread))  # the raw spread is 3x too narrow
    >>> calibration = ConformalStd(window=2000)
    >>> calibration.add(residual, spread)
    >>> bool(2.7 < calibration.scale < 3.3)
    True
    >>> [round(c, 2) for c in calibration.coverage()]  # +-1 std, +-1.96 std
    [0.69, 0.95]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wmrl_env.world_models.text import text_key

__all__ = ["ConformalStd", "coverage_scale", "held_out_mask"]

#: the nominal coverages of +-1 and +-1.96 std under a normal error
NOMINAL = ((1.0, 0.683), (1.96, 0.95))
#: the quantiles of the normalised errors :func:`coverage_scale` tries as the scale
SCALE_QUANTILES = np.linspace(0.5, 0.85, 71)


def coverage_scale(
    errors_by_floor: Mapping[float, Sequence[np.ndarray]],
    quantiles: np.ndarray = SCALE_QUANTILES,
) -> tuple[float, float]:
    """The (scale, floor) whose ``+-scale`` and ``+-1.96 scale`` cover 68.3 % and 95 % of
    every group of normalised errors as nearly as one scale can.

    ``errors_by_floor`` maps each candidate floor to groups of ``|error| / width``, the width
    computed with that floor (how a floor enters the width is the caller's). The scales tried
    are the positive ``quantiles`` of each floor's pooled errors; a scale's cost is its largest
    coverage error over the groups and both levels; the first floor and scale of the lowest
    cost win, (1.0, 0.0) when no scale is positive.

    >>> errors = np.abs(np.random.default_rng(0).normal(0.0, 2.0, size=4000))
    >>> scale, floor = coverage_scale({0.0: [errors], 0.5: [errors / 1.1]})
    >>> round(scale, 1), floor
    (2.0, 0.0)
    """
    best = (np.inf, 1.0, 0.0)
    for floor, groups in errors_by_floor.items():
        for scale in np.quantile(np.concatenate(groups), quantiles):
            if not scale > 0:
                continue
            cost = max(abs(np.mean(z <= k * scale) - p) for z in groups for k, p in NOMINAL)
            if cost < best[0]:
                best = (cost, float(scale), floor)
    return best[1], best[2]


class ConformalStd:
    """A window of held-out (absolute residual, raw spread) pairs and the std scale they fit.

    Args:
        window: residuals kept (the newest; older ones came from an older model).
        min_residuals: below this many the raw spread is returned unchanged.
        floors: candidate floors, in score units, added in quadrature to the spread.
    """

    def __init__(
        self,
        window: int = 256,
        min_residuals: int = 16,
        floors: tuple[float, ...] = (0.0, 0.01, 0.03, 0.1),
    ) -> None:
        if window < 2 or min_residuals < 2 or min_residuals > window:
            raise ValueError("need 2 <= min_residuals <= window")
        if not floors or any(not np.isfinite(f) or f < 0 for f in floors):
            raise ValueError(f"floors must be non-negative and finite, got {floors}")
        self.window = window
        self.min_residuals = min_residuals
        self.floors = tuple(float(f) for f in floors)
        self._pairs: deque[tuple[float, float]] = deque(maxlen=window)
        self.scale, self.floor = 1.0, 0.0

    @property
    def fitted(self) -> bool:
        """Whether enough residuals were seen for the scale to be a calibrated one."""
        return len(self._pairs) >= self.min_residuals

    def __len__(self) -> int:
        return len(self._pairs)

    def add(self, residuals: np.ndarray, spreads: np.ndarray) -> None:
        """Add held-out absolute residuals and their raw spreads (non-finite pairs skipped),
        then refit the scale and floor."""
        residuals = np.abs(np.asarray(residuals, dtype=np.float64).reshape(-1))
        spreads = np.asarray(spreads, dtype=np.float64).reshape(-1)
        if residuals.shape != spreads.shape:
            raise ValueError(f"got {residuals.shape[0]} residuals for {spreads.shape[0]} spreads")
        usable = np.isfinite(residuals) & np.isfinite(spreads) & (spreads >= 0)
        self._pairs.extend(zip(residuals[usable].tolist(), spreads[usable].tolist(), strict=True))
        if self.fitted:
            self.scale, self.floor = self._fit()

    def reset(self) -> None:
        """Forget every residual (the raw spread passes unchanged again)."""
        self._pairs.clear()
        self.scale, self.floor = 1.0, 0.0

    def apply(self, spreads: np.ndarray) -> np.ndarray:
        """The calibrated std for raw spreads (unchanged until :attr:`fitted`)."""
        spreads = np.asarray(spreads, dtype=np.float64)
        return self.scale * np.sqrt(spreads**2 + self.floor**2)

    def coverage(self) -> tuple[float, float]:
        """In-window coverage of +-1 and +-1.96 calibrated std (NaN when empty)."""
        if not self._pairs:
            return float("nan"), float("nan")
        residual, spread = np.array(self._pairs).T
        std = self.apply(spread)
        return tuple(float(np.mean(residual <= k * std)) for k, _ in NOMINAL)  # type: ignore[return-value]

    def _fit(self) -> tuple[float, float]:
        residual, spread = np.array(self._pairs).T
        widths = {floor: np.sqrt(spread**2 + floor**2) for floor in self.floors}
        return coverage_scale({f: [residual / w] for f, w in widths.items() if (w > 0).all()})

    def state_dict(self) -> dict[str, Any]:
        """The window (residuals, spreads) and the fitted scale and floor."""
        residual, spread = np.array(self._pairs).T if self._pairs else (np.empty(0),) * 2
        return {"residuals": residual, "spreads": spread, "scale": self.scale, "floor": self.floor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self._pairs.clear()
        residuals = np.asarray(state["residuals"], dtype=np.float64)
        spreads = np.asarray(state["spreads"], dtype=np.float64)
        self._pairs.extend(zip(residuals.tolist(), spreads.tolist(), strict=True))
        self.scale, self.floor = float(state["scale"]), float(state["floor"])


def held_out_mask(texts: Sequence[str], fraction: float) -> np.ndarray:
    """Which texts to keep out of training for calibration: a stable hash of each text below
    ``fraction`` of its range, so the same text always gets the same answer.

    >>> held_out_mask(["a", "b", "c", "d", "a"], 0.5).tolist()
    [True, False, False, True, True]
    """
    return np.array([int(text_key(t)[:8], 16) < fraction * 16**8 for t in texts], dtype=bool)
