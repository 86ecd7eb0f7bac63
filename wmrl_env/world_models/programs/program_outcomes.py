"""The prediction contract for the program world models (v2, v3): score, std and status.

v2 and v3 are pretrained on rewards in which a failed run scores ``0``
(:data:`TRAINING_FAILURE_SCORE`): their ``predict`` is an expected reward. With a
:class:`~wmrl_env.world_models.programs.status_model.StatusModel` (the committed one is learned from
the execution table's statuses on the same pretraining tasks) the score given ``ok`` is the
expected reward with the failures taken out, ``(E - (1 - p_ok) * 0) / p_ok`` (``p_ok`` at
least :data:`MIN_OK_SHARE`, clipped to the score range); without one every parseable program
is ``ok`` with probability 1. The std is the model's calibrated std of the reward. The
pre-gate answers its certain cases exactly. Score, status and pre-gate share one parse: rows
are read from the model's row cache and the gate takes the featurizer's "does it parse"
(the same predicate, :func:`~wmrl_env.utils.python_source.parses`); status probabilities
are cached by (task, program).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from wmrl_env.world_models.outcomes import (
    STATUSES,
    UNKNOWN_ERROR,
    OutcomePrediction,
    combine_with_gate,
)
from wmrl_env.world_models.text import as_text, text_key

__all__ = ["MIN_OK_SHARE", "TRAINING_FAILURE_SCORE", "program_outcomes"]

TRAINING_FAILURE_SCORE = 0.0
"""The reward a failed run had in the pretraining pairs of v2 and v3."""
MIN_OK_SHARE = 0.05
"""The smallest ``p_ok`` the score given ``ok`` is divided by."""
MAX_CACHED = 100_000
"""(task, program) pairs whose status probabilities are kept (the oldest evicted first)."""


def program_outcomes(
    model: Any,
    row_builder: Any,
    contexts: Sequence[Any],
    artifacts: Sequence[Any],
    failure_score: float | None = None,
) -> OutcomePrediction:
    """:class:`OutcomePrediction` of a program world model with ``predict``, ``pre_gate``,
    ``status_model`` (or None) and ``score_range``; ``row_builder`` its cached
    :class:`~wmrl_env.world_models.programs.program_rows.ProgramTaskRows`."""
    prediction = model.predict(contexts, artifacts)
    programs = [as_text(a) for a in artifacts]
    parsed = [features is not None for features in row_builder.programs(programs)]
    answer = model.pre_gate.answer(programs, parses=parsed)  # the featurizer's parse, shared
    n = len(programs)
    low, high = model.score_range
    failure = low if failure_score is None else float(failure_score)
    probs = np.zeros((n, len(STATUSES)))
    probs[:, 0] = 1.0
    classes: tuple[str, ...] = (UNKNOWN_ERROR,)
    error_probs = None
    status_model = getattr(model, "status_model", None)
    if status_model is not None:
        classes = status_model.error_classes
        error_probs = np.full((n, len(classes)), 1.0 / len(classes))
        cached = _status_rows(model, status_model, row_builder, list(contexts), programs)
        for i, found in enumerate(cached):
            if found is not None:
                probs[i], error_probs[i] = found
    p_ok = np.maximum(probs[:, 0], MIN_OK_SHARE)
    given_ok = (prediction.scores - (1.0 - p_ok) * TRAINING_FAILURE_SCORE) / p_ok
    score = np.clip(given_ok, low, high)
    std = prediction.std if prediction.std is not None else np.full(n, np.nan)
    return combine_with_gate(answer, probs, score, std, failure, classes, error_probs)


def _status_rows(
    model: Any, status_model: Any, row_builder: Any, contexts: list[Any], programs: list[str]
) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """Per item, (status probabilities, error-class probabilities) of a parseable program,
    ``None`` for the others; cached on the model by (task, program) key, keyed to the status
    model in use (a repeated program costs a dictionary lookup)."""
    cache = getattr(model, "_status_cache", None)
    if cache is None or cache[0] is not status_model:
        cache = model._status_cache = (status_model, OrderedDict())
    store = cache[1]
    task_keys = [text_key(as_text(c)) for c in contexts]
    program_keys = [text_key(p) for p in programs]
    keys = list(zip(task_keys, program_keys, strict=True))
    missing = [i for i, key in enumerate(keys) if key not in store]
    if missing:
        rows, parsed = row_builder(
            [contexts[i] for i in missing],
            [programs[i] for i in missing],
            [task_keys[i] for i in missing],
            [program_keys[i] for i in missing],
        )
        found: list[Any] = [None] * len(missing)
        if parsed.any():
            probs, _, errors = status_model.predict(rows[parsed])
            for j, row in enumerate(np.flatnonzero(parsed)):
                found[row] = (probs[j], errors[j])
        for i, value in zip(missing, found, strict=True):
            store[keys[i]] = value
        while len(store) > MAX_CACHED:
            store.popitem(last=False)
    return [store[key] for key in keys]
