"""``ScriptedReviser``: the reference multi-turn policy for the structured program space.

It reads only the observation text (a real or a simulated turn report alike), fixes a failed
program by the error it reports (missing values → impute, infinities → no ``log1p``, a time
limit → a smaller model), and once a program runs it explores the neighbours of the best
program so far (one choice changed at a time: capacity, then model, then preprocessing). On the
last turn, or when nothing untried is left, it ends on its best: it stops if the previous program
was the best so far, else submits that best again (so a ``"final"`` reward reads its best).

Example:
    >>> from wmrl_env.envs.ml_tasks import MLTaskMultiTurnEnv
    >>> env = MLTaskMultiTurnEnv(tasks=["iris"], executor="replay", max_turns=3)
    >>> reviser = ScriptedReviser(start=ProgramSpec("none", "knn", "mid"), seed=0)
    >>> observation, _ = env.reset(seed=0)
    >>> reviser.reset()
    >>> terminated = False
    >>> while not terminated:
    ...     observation, reward, terminated, _, info = env.step(reviser.act(observation))
    >>> info["turns"] <= 3, reward == info["final_score"] == info["best_score"]
    (True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .programs import CAPACITIES, MODELS, PREPROCESSINGS, ProgramSpec
from .turns import TurnReport, parse_report

__all__ = ["ScriptedReviser", "fix_for_error", "neighbours", "play_episode"]

_NEIGHBOUR_ORDER = ("capacity", "model", "preprocessing")
_OPTIONS = {"preprocessing": PREPROCESSINGS, "model": MODELS, "capacity": CAPACITIES}


class ScriptedReviser:
    """Fix by the reported error, then hill-climb over one-choice changes.

    Args:
        start: the first program; ``None`` draws one uniformly (the untrained policy).
        seed: seeds the first draw and the order in which equal neighbours are tried.
        resubmit_best: on the last turn, end on the best program so far (stop, or submit it
            again) instead of exploring (what a ``"final"`` reward asks for).
    """

    def __init__(
        self, start: ProgramSpec | None = None, *, seed: int = 0, resubmit_best: bool = True
    ) -> None:
        self.start = start
        self.resubmit_best = resubmit_best
        self._rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> None:
        """Forget the episode (call with the env's ``reset``)."""
        self._last: ProgramSpec | None = None
        self._best: tuple[float, ProgramSpec] | None = None
        self._tried: set[ProgramSpec] = set()

    def act(self, observation: str) -> ProgramSpec | str:
        """The next program for this observation, or ``"STOP"``."""
        report = parse_report(observation)
        if report is None or self._last is None:  # the task description: first turn
            return self._submit(self.start or self._draw())
        if report.score is not None and (self._best is None or report.score > self._best[0]):
            self._best = (report.score, self._last)
        if report.turn + 1 == report.max_turns and self.resubmit_best and self._best is not None:
            return self._end_on_best()
        candidate = fix_for_error(self._last, report) if report.status != "ok" else None
        if candidate is None or candidate in self._tried:
            candidate = self._explore()
        if candidate is None:  # nothing untried
            return self._end_on_best()
        return self._submit(candidate)

    def _end_on_best(self) -> ProgramSpec | str:
        """Stop if the last program is the best so far, else submit the best again."""
        if self._best is None or self._best[1] == self._last:
            return "STOP"
        return self._submit(self._best[1])

    # ---------------------------------------------------------------------------- helpers

    def _submit(self, spec: ProgramSpec) -> ProgramSpec:
        self._last = spec
        self._tried.add(spec)
        return spec

    def _draw(self) -> ProgramSpec:
        return ProgramSpec(*(str(self._rng.choice(_OPTIONS[name])) for name in _OPTIONS))

    def _explore(self) -> ProgramSpec | None:
        """An untried neighbour of the best program (of the last one while none ran)."""
        anchor = self._best[1] if self._best is not None else self._last
        assert anchor is not None
        for name in _NEIGHBOUR_ORDER:
            options = [o for o in _OPTIONS[name] if o != getattr(anchor, name)]
            for option in self._rng.permutation(options):
                candidate = _with(anchor, **{name: str(option)})
                if candidate not in self._tried:
                    return candidate
        return None


def fix_for_error(spec: ProgramSpec, report: TurnReport) -> ProgramSpec:
    """The scripted fix of a failed program by the error its report shows (missing values:
    impute; infinities: no ``log1p`` or products; a time limit: a smaller model; anything
    else: a forest on imputed, scaled features)."""
    text = f"{report.error_class} {report.traceback_tail}"
    missing = "missing values" in text or "NaN" in text
    if missing and spec.preprocessing in ("none", "log1p"):
        return _with(spec, preprocessing="standardize")
    infinite = "infinity" in text or "too large" in text
    if infinite and spec.preprocessing in ("log1p", "poly2"):
        return _with(spec, preprocessing="standardize")
    if report.status == "timeout":
        if spec.capacity != "low":
            return _with(spec, capacity=CAPACITIES[CAPACITIES.index(spec.capacity) - 1])
        if spec.preprocessing == "poly2":
            return _with(spec, preprocessing="standardize")
    return _with(spec, preprocessing="standardize", model="forest")


def neighbours(spec: ProgramSpec) -> list[ProgramSpec]:
    """Every program that changes one choice of ``spec`` (capacity, model or preprocessing)."""
    return [
        _with(spec, **{name: option})
        for name in _NEIGHBOUR_ORDER
        for option in _OPTIONS[name]
        if option != getattr(spec, name)
    ]


def _with(spec: ProgramSpec, **changes: str) -> ProgramSpec:
    fields = {"preprocessing": spec.preprocessing, "model": spec.model, "capacity": spec.capacity}
    return ProgramSpec(**(fields | changes))


def play_episode(env: Any, reviser: ScriptedReviser, *, seed: int) -> list[tuple[Any, ...]]:
    """Play one episode of ``env`` (a multi-turn env) with ``reviser`` from ``seed``; returns
    every ``step`` result ``(observation, reward, terminated, truncated, info)`` in order.

    Example:
        >>> from wmrl_env.envs.ml_tasks.multiturn import MLTaskMultiTurnEnv
        >>> env = MLTaskMultiTurnEnv(tasks=["iris"], executor="replay", max_turns=2)
        >>> steps = play_episode(env, ScriptedReviser(seed=0), seed=0)
        >>> 1 <= len(steps) <= 2 and steps[-1][2]
        True
    """
    observation, _ = env.reset(seed=seed)
    steps: list[tuple[Any, ...]] = []
    while not steps or not steps[-1][2]:
        steps.append(env.step(reviser.act(observation)))
        observation = steps[-1][0]
    return steps
