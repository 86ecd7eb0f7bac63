"""``RevisionPolicy``: a small learnable multi-turn policy over the structured program space.

Shared by every task, so what it learns on training tasks transfers to held-out ones. The
first program draws each choice (preprocessing, model, capacity) from a softmax of its own
logits; after a failed run it applies the scripted fix for the reported error
(:func:`~wmrl_env.envs.ml_tasks.reviser.fix_for_error`, no parameter); after a run that scored it
changes one choice of the best program so far: which choice from a softmax over the three
dimensions, the new value from that choice's softmax over the other values. It reads only the
observation text, so a real and a simulated turn drive it alike. ``grad_log_prob`` of an
episode is the sum of its sampled choices' score functions (REINFORCE).

Example:
    >>> import numpy as np
    >>> policy = RevisionPolicy()
    >>> episode = policy.new_episode()
    >>> rng = np.random.default_rng(0)
    >>> spec = episode.act("Task iris: ...", rng)
    >>> spec.model in ("linear", "knn", "tree", "forest", "boosting", "svm")
    True
    >>> episode.grad.shape == policy.params.shape, float(np.abs(episode.grad).sum()) > 0
    (True, True)
"""

from __future__ import annotations

import numpy as np

from wmrl_env.envs.ml_tasks.programs import CAPACITIES, MODELS, PREPROCESSINGS, ProgramSpec
from wmrl_env.envs.ml_tasks.reviser import fix_for_error
from wmrl_env.envs.ml_tasks.turns import parse_report

__all__ = ["DIMENSIONS", "RevisionEpisode", "RevisionPolicy"]

DIMENSIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("preprocessing", PREPROCESSINGS),
    ("model", MODELS),
    ("capacity", CAPACITIES),
)
_OFFSETS = np.cumsum([0] + [len(options) for _, options in DIMENSIONS])
_CHOICE_SLICE = slice(_OFFSETS[-1], _OFFSETS[-1] + len(DIMENSIONS))  # which dimension to change


class RevisionPolicy:
    """Logits for each choice's values (13) and for which dimension a revision changes (3)."""

    def __init__(self, params: np.ndarray | None = None) -> None:
        size = int(_OFFSETS[-1]) + len(DIMENSIONS)
        self.params = np.zeros(size) if params is None else np.asarray(params, dtype=np.float64)
        if self.params.shape != (size,):
            raise ValueError(f"params must have shape ({size},), got {self.params.shape}")

    def new_episode(self, greedy: bool = False) -> RevisionEpisode:
        """A fresh episode's state (``greedy``: take the most likely choices)."""
        return RevisionEpisode(self, greedy)


class RevisionEpisode:
    """One episode's memory (the programs it tried, the best so far) and score function."""

    def __init__(self, policy: RevisionPolicy, greedy: bool) -> None:
        self.policy = policy
        self.greedy = greedy
        self.grad = np.zeros_like(policy.params)
        self.last: ProgramSpec | None = None
        self.best: tuple[float, ProgramSpec] | None = None
        self.tried: set[ProgramSpec] = set()
        self.fixes = 0

    def act(self, observation: str, rng: np.random.Generator) -> ProgramSpec:
        """The next program for this observation."""
        report = parse_report(observation)
        if report is None or self.last is None:
            return self._submit(self._first(rng))
        if report.score is not None and (self.best is None or report.score > self.best[0]):
            self.best = (report.score, self.last)
        if report.status != "ok":
            fix = fix_for_error(self.last, report)
            if fix is not None and fix not in self.tried:
                self.fixes += 1
                return self._submit(fix)
        return self._submit(self._revise(rng))

    # ---------------------------------------------------------------------------- helpers

    def _submit(self, spec: ProgramSpec) -> ProgramSpec:
        self.last = spec
        self.tried.add(spec)
        return spec

    def _first(self, rng: np.random.Generator) -> ProgramSpec:
        values = {}
        for k, (name, options) in enumerate(DIMENSIONS):
            span = slice(int(_OFFSETS[k]), int(_OFFSETS[k + 1]))
            values[name] = options[self._draw(span, np.ones(len(options), bool), rng)]
        return ProgramSpec(**values)

    def _revise(self, rng: np.random.Generator) -> ProgramSpec:
        base = self.best[1] if self.best is not None else self.last
        dimension = self._draw(_CHOICE_SLICE, np.ones(len(DIMENSIONS), bool), rng)
        name, options = DIMENSIONS[dimension]
        allowed = np.array([option != getattr(base, name) for option in options])
        span = slice(int(_OFFSETS[dimension]), int(_OFFSETS[dimension + 1]))
        value = options[self._draw(span, allowed, rng)]
        fields = {n: getattr(base, n) for n, _ in DIMENSIONS} | {name: value}
        return ProgramSpec(**fields)

    def _draw(self, span: slice, allowed: np.ndarray, rng: np.random.Generator) -> int:
        """Sample (or take the best of) a softmax over ``allowed`` values; add its score
        function to ``grad``."""
        logits = np.where(allowed, self.policy.params[span], -np.inf)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        index = int(np.argmax(p)) if self.greedy else int(rng.choice(len(p), p=p))
        self.grad[span] += np.eye(len(p))[index] - p
        return index
