"""The prediction contract for the program world models (v2, v3): score, std and status.

v2 and v3 are pretrained on rewards in which a failed run scores ``0``
(:data:`TRAINING_FAILURE_SCORE`): their ``predict`` is an expected reward. With a
:class:`~wmrl_env.world_models.status_model.StatusModel` (the committed one is learned from
the execution table's statuses on the same pretraining tasks) the score given ``ok`` is the
expected reward with the failures taken out, ``(E - (1 - p_ok) * 0) / p_ok`` (``p_ok`` at
least :data:`MIN_OK_SHARE`, clipped to the score range); without one every parseable program
is ``ok`` with probability 1. The std is the model's calibrated std of the reward. The
pre-gate answers its certain cases exactly. Rows are read from the model's row cache, so the
status costs no second parse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from wmrl_env.world_models.outcomes import (
    STATUSES,
    UNKNOWN_ERROR,
    OutcomePrediction,
    combine_with_gate,
)
from wmrl_env.world_models.text import as_text

__all__ = ["MIN_OK_SHARE", "TRAINING_FAILURE_SCORE", "program_outcomes"]

TRAINING_FAILURE_SCORE = 0.0
"""The reward a failed run had in the pretraining pairs of v2 and v3."""
MIN_OK_SHARE = 0.05
"""The smallest ``p_ok`` the score given ``ok`` is divided by."""


def program_outcomes(
    model: Any,
    row_builder: Any,
    contexts: Sequence[Any],
    artifacts: Sequence[Any],
    failure_score: float | None = None,
) -> OutcomePrediction:
    """:class:`OutcomePrediction` of a program world model with ``predict``, ``pre_gate``,
    ``status_model`` (or None) and ``score_range``; ``row_builder`` its cached
    :class:`~wmrl_env.world_models.program_rows.ProgramTaskRows`."""
    prediction = model.predict(contexts, artifacts)
    programs = [as_text(a) for a in artifacts]
    answer = model.pre_gate.answer(programs)
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
        rows, parsed = row_builder(list(contexts), programs)
        if parsed.any():
            probs[parsed], _, error_probs[parsed] = status_model.predict(rows[parsed])
    p_ok = np.maximum(probs[:, 0], MIN_OK_SHARE)
    given_ok = (prediction.scores - (1.0 - p_ok) * TRAINING_FAILURE_SCORE) / p_ok
    score = np.clip(given_ok, low, high)
    std = prediction.std if prediction.std is not None else np.full(n, np.nan)
    return combine_with_gate(answer, probs, score, std, failure, classes, error_probs)
