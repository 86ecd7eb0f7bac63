"""A discretised score vocabulary: how a language model writes a score and how we read it.

A language-model world model answers with one of ``n`` score tokens (by default the digits
``"0"`` .. ``"9"``). Token ``k`` stands for the value ``low + k * (high - low) / (n - 1)``, so
the ends of the score range are representable exactly (a test that passes scores ``high``).

* Expectation mode reads the next-token probabilities of the score tokens, renormalises them
  and returns their mean and standard deviation (:meth:`ScoreBins.expectation`).
* Training uses soft targets: a real score between two token values puts its mass on those two
  tokens in proportion to its distance, so that the expectation of the target *is* the score
  (:meth:`ScoreBins.soft_targets`).
* Generate-and-parse mode reads the first number in the generated text
  (:meth:`ScoreBins.parse`).

Example:
    >>> import numpy as np
    >>> bins = ScoreBins(score_range=(0.0, 1.0), tokens=("0", "1", "2"))
    >>> bins.values.tolist()
    [0.0, 0.5, 1.0]
    >>> bins.soft_targets(np.array([0.75])).round(2).tolist()
    [[0.0, 0.5, 0.5]]
    >>> mean, std, mass = bins.expectation(np.log(np.array([[0.0, 0.1, 0.1]]) + 1e-30))
    >>> round(float(mean[0]), 6), round(float(mass[0]), 6)
    (0.75, 0.2)
    >>> bins.parse(["Score: 2", "maybe 7", "no idea"])
    ([1.0, nan, nan], ['', 'out_of_range', 'unparseable'])
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["DIGITS", "ScoreBins"]

DIGITS: tuple[str, ...] = tuple(str(d) for d in range(10))

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class ScoreBins:
    """Score tokens and the values they stand for.

    Attributes:
        score_range: ``(low, high)`` of the real score.
        tokens: the strings the model writes, lowest score first; each must be a single token
            of the model's tokenizer (checked by the backends).
    """

    score_range: tuple[float, float] = (0.0, 1.0)
    tokens: tuple[str, ...] = DIGITS

    def __post_init__(self) -> None:
        low, high = (float(v) for v in self.score_range)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"score_range must be finite with low < high, got {self.score_range}")
        object.__setattr__(self, "score_range", (low, high))
        object.__setattr__(self, "tokens", tuple(self.tokens))
        if len(self.tokens) < 2 or len(set(self.tokens)) != len(self.tokens):
            raise ValueError(f"tokens must be at least two distinct strings, got {self.tokens}")

    @property
    def values(self) -> np.ndarray:
        """The score each token stands for, shape ``(n,)``."""
        low, high = self.score_range
        return np.linspace(low, high, len(self.tokens))

    def expectation(self, log_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean, std and total probability mass of the score tokens.

        Args:
            log_probs: shape ``(N, n)``, the next-token log-probabilities of the score tokens
                (normalised over the whole vocabulary, so their mass may be below 1).
        """
        log_probs = np.asarray(log_probs, dtype=np.float64)
        if log_probs.ndim != 2 or log_probs.shape[1] != len(self.tokens):
            raise ValueError(
                f"log_probs must have shape (N, {len(self.tokens)}), got {log_probs.shape}"
            )
        with np.errstate(invalid="ignore", over="ignore"):
            top = np.max(log_probs, axis=1, keepdims=True)
            weights = np.exp(log_probs - top)
            total = weights.sum(axis=1, keepdims=True)
            probs = weights / total
            mass = (total[:, 0] * np.exp(top[:, 0])).clip(0.0, 1.0)
            mean = probs @ self.values
            std = np.sqrt(np.maximum(probs @ self.values**2 - mean**2, 0.0))
        return mean, std, mass

    def soft_targets(self, scores: np.ndarray) -> np.ndarray:
        """Target distributions over the tokens, shape ``(N, n)``, whose means equal ``scores``.

        Raises ``ValueError`` for NaN or out-of-range scores: training on them would teach the
        model garbage.
        """
        scores = np.asarray(scores, dtype=np.float64)
        low, high = self.score_range
        bad = ~np.isfinite(scores) | (scores < low) | (scores > high)
        if bad.any():
            raise ValueError(
                f"{int(bad.sum())} scores are NaN or outside {self.score_range}, "
                f"e.g. {scores[bad][:3].tolist()}"
            )
        position = (scores - low) / (high - low) * (len(self.tokens) - 1)
        lower = np.floor(position).astype(int).clip(0, len(self.tokens) - 2)
        upper_weight = position - lower
        targets = np.zeros((scores.shape[0], len(self.tokens)))
        rows = np.arange(scores.shape[0])
        targets[rows, lower] = 1.0 - upper_weight
        targets[rows, lower + 1] += upper_weight
        return targets

    def parse(self, texts: Sequence[str]) -> tuple[list[float], list[str]]:
        """Read the first number of each generated text as a score token.

        Returns the scores (NaN when invalid) and per-item reasons: ``""`` when valid,
        ``"unparseable"`` when there is no number, ``"out_of_range"`` when the number is not one
        of the score tokens.
        """
        lookup = dict(zip(self.tokens, self.values.tolist(), strict=True))
        scores: list[float] = []
        reasons: list[str] = []
        for text in texts:
            match = _NUMBER.search(text)
            if match is None:
                scores.append(math.nan)
                reasons.append("unparseable")
            elif match.group() in lookup:
                scores.append(lookup[match.group()])
                reasons.append("")
            else:
                scores.append(math.nan)
                reasons.append("out_of_range")
        return scores, reasons
