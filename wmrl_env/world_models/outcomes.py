"""The prediction contract: what a real run would report, per sample, as probabilities.

A real execution ends in one of :data:`STATUSES` (a crash with an error class) and, when
``ok``, a score. Every outcome world model answers ``predict_outcomes(contexts, artifacts,
failure_score=...)`` with an :class:`OutcomePrediction`: the probability of each status, the
error classes of a crash, the score given ``ok`` with its std, the expected reward under
the task's failure score, and which items the deterministic pre-gate
(:class:`~wmrl_env.sandboxes.pregate.PreGate`) answered exactly (``known``).

:func:`observed_status` maps a logged execution (its status, message, program) onto the
same statuses, so predictions and real runs are compared on one scale (``wmrl fidelity``).

Example:
    >>> import numpy as np
    >>> p = OutcomePrediction.build(
    ...     status_probs=np.array([[0.8, 0.0, 0.2, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0]]),
    ...     score=np.array([0.9, np.nan]), std=np.array([0.1, np.nan]),
    ...     known=np.array([False, True]), failure_score=0.0)
    >>> p.expected_reward.round(3).tolist(), p.p_fail.round(3).tolist(), p.status().tolist()
    ([0.72, 0.0], [0.2, 1.0], ['ok', 'does_not_parse'])
    >>> observed_status("crashed", "exit status 1: ZeroDivisionError: division by zero", "1/0")
    ('crashed', 'ZeroDivisionError')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.sandboxes.pregate import KnownOutcomes
from wmrl_env.sandboxes.syntax import does_not_parse

__all__ = [
    "FAILURE_STATUSES",
    "STATUSES",
    "UNKNOWN_ERROR",
    "OutcomePrediction",
    "combine_with_gate",
    "error_class",
    "known_rows",
    "observed_status",
    "outcomes_without_status",
]

STATUSES: tuple[str, ...] = ("ok", "does_not_parse", "crashed", "timeout", "invalid_output")
"""The statuses of the contract, in the column order of ``status_probs``."""
FAILURE_STATUSES: tuple[str, ...] = STATUSES[1:]
UNKNOWN_ERROR = "unknown"
"""The error class of a crash whose message names none."""

_INDEX = {status: i for i, status in enumerate(STATUSES)}
_EXCEPTION = re.compile(
    r"(?:^|[\s:])((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning))(?::|$)"
)


def error_class(message: str, stderr: str = "") -> str:
    """The exception class a crash reports: the last ``Name:`` ending in Error/Exception/...
    in ``stderr`` (the traceback), else in ``message``; :data:`UNKNOWN_ERROR` when neither
    names one. A dotted name keeps its last part.

    >>> error_class("exit status 1: numpy.linalg.LinAlgError: Singular matrix")
    'LinAlgError'
    >>> error_class("exit status 1: Ridge does not accept missing values")
    'unknown'
    """
    for text in (stderr, message):
        found = [m for line in text.splitlines() for m in _EXCEPTION.findall(line)]
        if found:
            return found[-1].rsplit(".", 1)[-1]
    return UNKNOWN_ERROR


def observed_status(
    status: str, message: str = "", program: Any = None, stderr: str = ""
) -> tuple[str, str]:
    """(contract status, error class) of a real execution: ``out_of_memory`` is a crash
    (``MemoryError``); a crash of a program that does not compile is ``does_not_parse``;
    the error class is ``""`` unless crashed. Raises ``ValueError`` for ``error`` (an
    infrastructure failure says nothing about the program) and unknown statuses."""
    if status == "error":
        raise ValueError("an infrastructure failure ('error') has no program outcome")
    if status == "out_of_memory":
        return "crashed", "MemoryError"
    if status == "crashed":
        if does_not_parse(program):
            return "does_not_parse", ""
        return "crashed", error_class(message, stderr)
    if status not in _INDEX or status == "does_not_parse":
        raise ValueError(f"unknown execution status {status!r}")
    return status, ""


@dataclass(frozen=True)
class OutcomePrediction:
    """Predicted outcomes of a batch (every array has ``N`` rows).

    Attributes:
        status_probs: ``(N, 5)``, columns :data:`STATUSES`, rows sum to 1.
        score: ``(N,)`` the score given ``ok`` (NaN where ``ok`` is impossible).
        std: ``(N,)`` its predictive std (NaN where unknown or ``ok`` is impossible).
        expected_reward: ``(N,)`` ``p_ok * score + (1 - p_ok) * failure_score`` (NaN where
            ``ok`` is possible but the model has no score).
        failure_score: the real score a failed execution gets.
        known: ``(N,)`` bool: answered exactly by the pre-gate (never evidence).
        error_classes: the crash classes of ``error_probs``' columns.
        error_probs: ``(N, len(error_classes))``: the class of a crash, given crashed
            (rows sum to 1; uniform where the model knows no classes).
        reasons: per item, the pre-gate's reason (``""`` where not known).
    """

    status_probs: np.ndarray
    score: np.ndarray
    std: np.ndarray
    expected_reward: np.ndarray
    failure_score: float
    known: np.ndarray
    error_classes: tuple[str, ...] = (UNKNOWN_ERROR,)
    error_probs: np.ndarray | None = None
    reasons: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.status_probs.shape[0])

    @classmethod
    def build(
        cls,
        status_probs: np.ndarray,
        score: np.ndarray,
        std: np.ndarray,
        known: np.ndarray,
        failure_score: float,
        error_classes: Sequence[str] = (UNKNOWN_ERROR,),
        error_probs: np.ndarray | None = None,
        reasons: Sequence[str] = (),
    ) -> OutcomePrediction:
        """Check shapes and probabilities, compute the expected reward."""
        probs = np.asarray(status_probs, dtype=np.float64)
        n = probs.shape[0]
        if probs.shape != (n, len(STATUSES)):
            raise ValueError(f"status_probs has shape {probs.shape}, expected ({n}, 5)")
        if not (np.isfinite(probs).all() and (probs >= 0).all()):
            raise ValueError("status_probs must be finite and non-negative")
        if n and not np.allclose(probs.sum(axis=1), 1.0, atol=1e-6):
            raise ValueError("status_probs rows must sum to 1")
        score = np.asarray(score, dtype=np.float64).reshape(n)
        std = np.asarray(std, dtype=np.float64).reshape(n)
        known = np.asarray(known, dtype=bool).reshape(n)
        classes = tuple(error_classes)
        if error_probs is None:
            error_probs = np.full((n, len(classes)), 1.0 / len(classes))
        error_probs = np.asarray(error_probs, dtype=np.float64)
        if error_probs.shape != (n, len(classes)):
            raise ValueError(
                f"error_probs has shape {error_probs.shape}, expected ({n}, {len(classes)})"
            )
        p_ok = probs[:, 0]
        given_ok = np.where(p_ok > 0, score, 0.0)  # NaN score, p_ok > 0: unknown
        expected = p_ok * given_ok + (1.0 - p_ok) * float(failure_score)
        reasons = tuple(reasons) if len(reasons) == n else ("",) * n
        return cls(probs, score, std, expected, float(failure_score), known, classes,
                   error_probs, reasons)  # fmt: skip

    @property
    def p_ok(self) -> np.ndarray:
        return self.status_probs[:, 0]

    @property
    def p_fail(self) -> np.ndarray:
        """Probability that the run fails (any status but ``ok``)."""
        return 1.0 - self.status_probs[:, 0]

    def status(self) -> np.ndarray:
        """The most probable status of each item."""
        return np.array(STATUSES, dtype=object)[np.argmax(self.status_probs, axis=1)].astype(str)

    def error_class(self) -> np.ndarray:
        """The most probable error class of each item, given crashed."""
        return np.array(self.error_classes, dtype=object)[np.argmax(self.error_probs, axis=1)]


def known_rows(answer: KnownOutcomes) -> np.ndarray:
    """One-hot status rows of the pre-gate's known items (zeros elsewhere)."""
    rows = np.zeros((len(answer.known), len(STATUSES)))
    for i in np.flatnonzero(answer.known):
        rows[i, _INDEX[str(answer.status[i])]] = 1.0
    return rows


def combine_with_gate(
    answer: KnownOutcomes,
    model_probs: np.ndarray,
    score: np.ndarray,
    std: np.ndarray,
    failure_score: float,
    error_classes: Sequence[str] = (UNKNOWN_ERROR,),
    error_probs: np.ndarray | None = None,
) -> OutcomePrediction:
    """The contract from a model's status probabilities and the pre-gate's answer: known
    items take the gate's one-hot row (score and std NaN), the rest the model's."""
    known = answer.known
    probs = np.where(known[:, None], known_rows(answer), model_probs)
    score = np.where(known, np.nan, score)
    std = np.where(known, np.nan, std)
    return OutcomePrediction.build(probs, score, std, known, failure_score, error_classes,
                                   error_probs, answer.reasons)  # fmt: skip


def outcomes_without_status(
    answer: KnownOutcomes, prediction: Any, failure_score: float
) -> OutcomePrediction:
    """The contract of a world model that learns no status (it learns from ``ok`` runs'
    scores only): every item the pre-gate does not answer is ``ok`` with probability 1,
    its score and std the prediction's (NaN where the prediction is invalid, and then so
    is its expected reward)."""
    n = len(answer.known)
    probs = np.zeros((n, len(STATUSES)))
    probs[:, 0] = 1.0
    valid = np.ones(n, dtype=bool) if prediction.valid is None else prediction.valid
    score = np.where(valid, prediction.scores, np.nan)
    std = np.full(n, np.nan) if prediction.std is None else np.where(valid, prediction.std, np.nan)
    return combine_with_gate(answer, probs, score, std, failure_score)
