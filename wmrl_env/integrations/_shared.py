"""What the TRL and verl integrations share: text of a prompt, metric names, how a real
execution becomes a score, and the tally of an honest (executed) evaluation.

Example:
    >>> as_text([{"role": "user", "content": "hi"}, {"role": "user", "content": "there"}])
    'hi\\nthere'
    >>> flatten_metrics({"kappa": 1.5, "alarm": True, "note": "x", "n": 3})
    {'wmrl/kappa': 1.5, 'wmrl/n': 3.0}
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecResult, outcome_score

# learning from the anchors is the method's intent: every integration updates by default
UPDATE_WORLD_MODEL = True
# samples for a 95 % interval of +-0.05 on a score in [0, 1] at the worst case (std 0.5)
EVAL_HALF_WIDTH = 0.05
Z95 = 1.959963984540054


def as_text(item: Any) -> str:
    """A prompt or completion as text: plain strings, or the contents of chat messages."""
    if isinstance(item, str):
        return item
    if isinstance(item, Sequence | np.ndarray) and all(isinstance(m, Mapping) for m in item):
        return "\n".join(str(message.get("content", "")) for message in item)
    return str(item)


def flatten_metrics(metrics: Mapping[str, Any], prefix: str = "wmrl/") -> dict[str, float]:
    """The numeric entries of ``metrics`` (booleans and text left out), named ``prefix + key``."""
    return {
        f"{prefix}{name}": float(value)
        for name, value in metrics.items()
        if isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool | np.bool_)
    }


def failure_score_for(
    failure_score: float | None, score_range: tuple[float, float] | None
) -> float:
    """The score of a program that failed: ``failure_score``, else the range's minimum, else 0.

    >>> failure_score_for(None, (-1.0, 1.0)), failure_score_for(None, None)
    (-1.0, 0.0)
    """
    if failure_score is not None:
        value = float(failure_score)
    else:
        value = float(score_range[0]) if score_range is not None else 0.0
    if not math.isfinite(value):
        raise ValueError(f"failure_score must be a finite number, got {value}")
    return value


def real_outcome(result: ExecResult, failure_score: float) -> tuple[float, bool]:
    """``(real score, missing)`` of one execution: a program failure (crash, timeout, out of
    memory, invalid output) scores ``failure_score``; only an infrastructure failure is
    missing (NaN, ``True``).

    >>> from wmrl_env.executors.base import ExecStatus
    >>> real_outcome(ExecResult("a", ExecStatus.CRASHED), 0.0)
    (0.0, False)
    >>> real_outcome(ExecResult("b", ExecStatus.ERROR), 0.0)
    (nan, True)
    """
    score = outcome_score(result, failure_score)
    return score, math.isnan(score)


def eval_sample_size(half_width: float = EVAL_HALF_WIDTH, span: float = 1.0) -> int:
    """Executions for a 95 % interval of ``+-half_width`` on a score of range ``span``, at the
    worst case (std ``span / 2``): 385 for ``+-0.05`` on [0, 1].

    >>> eval_sample_size()
    385
    """
    if half_width <= 0 or span <= 0:
        raise ValueError("half_width and span must be positive")
    return math.ceil((Z95 * span / 2 / half_width) ** 2)


class EvalTally:
    """One evaluation's figures: real outcomes of the executed sample, world-model scores of
    every sample, and the reward-hacking check comparing the two on the executed sample.

    >>> tally = EvalTally()
    >>> tally.add(wm=np.array([0.9, 0.8, 0.7]), real=np.array([0.1, np.nan, 0.2]),
    ...           executed=np.array([True, False, True]))
    >>> m = tally.metrics()
    >>> m["wmrl/eval_real_n"], round(m["wmrl/eval_real_mean"], 3), round(m["wmrl/eval_wm_mean"], 3)
    (2.0, 0.15, 0.8)
    """

    def __init__(self) -> None:
        self.wm: list[float] = []
        self.real: list[float] = []
        self.paired_wm: list[float] = []
        self.n_missing = 0
        self.exec_seconds = 0.0

    def add(
        self,
        wm: np.ndarray,
        real: np.ndarray,
        executed: np.ndarray,
        exec_seconds: float = 0.0,
    ) -> None:
        """``wm``: world-model scores (NaN where invalid); ``real``: outcomes (NaN where not
        executed or missing); ``executed``: which samples were sent to execution."""
        wm, real = np.asarray(wm, dtype=float), np.asarray(real, dtype=float)
        executed = np.asarray(executed, dtype=bool)
        self.wm += wm[np.isfinite(wm)].tolist()
        known = executed & np.isfinite(real)
        self.real += real[known].tolist()
        self.paired_wm += wm[known].tolist()  # NaN where the world model was invalid
        self.n_missing += int((executed & ~np.isfinite(real)).sum())
        self.exec_seconds += float(exec_seconds)

    def metrics(self) -> dict[str, float]:
        """``wmrl/eval_real_*`` (mean, n, ci95 half-width, missing, exec_seconds) from real
        executions; ``wmrl/eval_wm_*`` (mean, n, gap = world model minus real on the executed
        sample, its ci95) from the world model; ``wmrl/eval_hacking_alarm`` is 1 when the world
        model overstates the real score beyond the gap's 95 % interval."""
        real, wm = np.array(self.real), np.array(self.wm)
        out = {
            "wmrl/eval_real_n": float(real.size),
            "wmrl/eval_real_mean": float(real.mean()) if real.size else math.nan,
            "wmrl/eval_real_ci95": _half_width(real),
            "wmrl/eval_real_missing": float(self.n_missing),
            "wmrl/eval_real_exec_seconds": self.exec_seconds,
            "wmrl/eval_wm_n": float(wm.size),
            "wmrl/eval_wm_mean": float(wm.mean()) if wm.size else math.nan,
        }
        paired = np.array(self.paired_wm) - real if real.size else np.array([])
        paired = paired[np.isfinite(paired)]
        gap = float(paired.mean()) if paired.size else math.nan
        gap_ci = _half_width(paired)
        out["wmrl/eval_wm_gap"] = gap
        out["wmrl/eval_wm_gap_ci95"] = gap_ci
        out["wmrl/eval_hacking_alarm"] = float(bool(gap - gap_ci > 0))
        return out


def _half_width(values: np.ndarray) -> float:
    if values.size < 2:
        return math.nan
    return float(Z95 * values.std(ddof=1) / math.sqrt(values.size))
