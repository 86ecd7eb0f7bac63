"""The prompt a language-model world model reads, and how its answer becomes a Prediction.

Shared by the transformers backend (:mod:`wmrl_env.world_models.lm.causal_lm`) and the vLLM
backend (:mod:`wmrl_env.world_models.lm.vllm_backend`), so both score exactly the same prompts.

Example:
    >>> import numpy as np
    >>> prompt = ScorePrompt(template="{context} | {artifact} | score {first}-{last}: ")
    >>> prompt.render("sort a list", "sorted(x)")
    'sort a list | sorted(x) | score 0-9: '
    >>> log_probs = np.log(np.full((2, 10), 0.01))        # 10 % of the mass on score tokens
    >>> p = prediction_from_log_probs(log_probs, prompt.bins, min_score_mass=0.5)
    >>> p.valid.tolist(), p.reasons
    ([False, False], ['low_score_mass', 'low_score_mass'])
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.sandboxes.pregate import PreGate
from wmrl_env.world_models.base import Prediction, as_prediction
from wmrl_env.world_models.conformal_std import ConformalStd, held_out_mask
from wmrl_env.world_models.lm.score_bins import ScoreBins
from wmrl_env.world_models.outcomes import STATUSES, OutcomePrediction, combine_with_gate
from wmrl_env.world_models.text import check_batch, check_real_scores

__all__ = [
    "DEFAULT_STATUS_TEMPLATE",
    "DEFAULT_STATUS_TOKENS",
    "DEFAULT_TEMPLATE",
    "MODES",
    "PromptScorer",
    "ScorePrompt",
    "StatusPrompt",
    "answer_token_ids",
    "prediction_from_generations",
    "prediction_from_log_probs",
]

DEFAULT_TEMPLATE = (
    "Task:\n{context}\n\nCandidate solution:\n{artifact}\n\n"
    "How well will this solution score when executed? "
    "Answer with one digit from {first} (worst) to {last} (best).\nScore: "
)

MODES: tuple[str, ...] = ("expectation", "generate")


@dataclass(frozen=True)
class ScorePrompt:
    """A prompt template and the score vocabulary its answer is read in.

    Attributes:
        template: ``str.format`` template with ``{context}`` and ``{artifact}``; ``{first}``
            and ``{last}`` name the lowest and highest score tokens. The score token must be
            the very next token after the rendered prompt.
        bins: the score tokens and the values they stand for.
    """

    template: str = DEFAULT_TEMPLATE
    bins: ScoreBins = field(default_factory=ScoreBins)

    def __post_init__(self) -> None:
        for name in ("{context}", "{artifact}"):
            if name not in self.template:
                raise ValueError(f"template must contain {name}")

    def render(self, context: str, artifact: str) -> str:
        return self.template.format(
            context=context,
            artifact=artifact,
            first=self.bins.tokens[0],
            last=self.bins.tokens[-1],
        )

    def render_batch(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> list[str]:
        """Prompts for a batch; ``ValueError`` when the lengths differ."""
        context_texts, artifact_texts = check_batch(contexts, artifacts)
        return [self.render(c, a) for c, a in zip(context_texts, artifact_texts, strict=True)]

    def score_token_ids(self, tokenizer: Any) -> list[int]:
        """Token ids of the score tokens under ``tokenizer``.

        Raises ``ValueError`` unless every score token is one token and appending it to a
        rendered prompt appends exactly that token (otherwise the next-token probabilities
        would not be the probabilities of the score).
        """
        return answer_token_ids(tokenizer, self.render("context", "artifact"), self.bins.tokens)


DEFAULT_STATUS_TEMPLATE = (
    "Task:\n{context}\n\nCandidate solution:\n{artifact}\n\n"
    "When this solution is executed, does it finish and write its output (O), crash (C), "
    "time out (T) or write an invalid output (I)? Answer with one letter.\nStatus:\n"
)
DEFAULT_STATUS_TOKENS: dict[str, str] = {
    "ok": "O",
    "crashed": "C",
    "timeout": "T",
    "invalid_output": "I",
}


@dataclass(frozen=True)
class StatusPrompt:
    """The question a language-model world model answers about how a run ends: one status
    token per status (``ok``, ``crashed``, ``timeout``, ``invalid_output``), read by their
    next-token probabilities (constrained to these tokens). ``does_not_parse`` is the
    pre-gate's. The default ends with a newline so a letter appended to it is one token
    under byte-level tokenizers.

    >>> StatusPrompt().render_batch(["Sort."], ["sorted(x)"])[0].endswith("Status:\\n")
    True
    """

    template: str = DEFAULT_STATUS_TEMPLATE
    tokens: tuple[tuple[str, str], ...] = tuple(DEFAULT_STATUS_TOKENS.items())

    def __post_init__(self) -> None:
        for name in ("{context}", "{artifact}"):
            if name not in self.template:
                raise ValueError(f"template must contain {name}")
        statuses = [status for status, _ in self.tokens]
        if sorted(statuses) != sorted(DEFAULT_STATUS_TOKENS):
            raise ValueError(f"tokens must name each of {sorted(DEFAULT_STATUS_TOKENS)} once")

    @property
    def statuses(self) -> tuple[str, ...]:
        return tuple(status for status, _ in self.tokens)

    def render_batch(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> list[str]:
        context_texts, artifact_texts = check_batch(contexts, artifacts)
        return [
            self.template.format(context=c, artifact=a)
            for c, a in zip(context_texts, artifact_texts, strict=True)
        ]

    def token_ids(self, tokenizer: Any) -> list[int]:
        """Token ids of the status tokens (checked as :meth:`ScorePrompt.score_token_ids`)."""
        prompt = self.template.format(context="context", artifact="artifact")
        return answer_token_ids(tokenizer, prompt, [token for _, token in self.tokens])


def answer_token_ids(tokenizer: Any, prompt: str, tokens: Sequence[str]) -> list[int]:
    """The id of each answer token; ``ValueError`` unless each is one token and appending it
    to ``prompt`` appends exactly that token."""
    ids = []
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    for token in tokens:
        encoded = tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(encoded) != 1:
            raise ValueError(
                f"answer token {token!r} is {len(encoded)} tokens for this tokenizer; "
                "choose tokens that are single tokens"
            )
        joined = tokenizer(prompt + token, add_special_tokens=False)["input_ids"]
        if joined != [*prompt_ids, encoded[0]]:
            raise ValueError(
                f"appending {token!r} to the prompt does not append one token under this "
                "tokenizer (it merges with the prompt's end); end the template differently, "
                "e.g. with or without a trailing space"
            )
        ids.append(encoded[0])
    return ids


def prediction_from_log_probs(
    log_probs: np.ndarray, bins: ScoreBins, min_score_mass: float = 0.0
) -> Prediction:
    """Expectation-mode prediction from the score tokens' next-token log-probabilities.

    The score is the mean of the renormalised score-token distribution, the std its spread.
    Items whose probability mass on the score tokens is below ``min_score_mass`` are flagged
    ``"low_score_mass"`` (the model was not answering with a score); NaN/inf are flagged too.
    """
    mean, std, mass = bins.expectation(log_probs)
    valid = ~(mass < min_score_mass)  # NaN mass stays valid here and is flagged "nan" below
    reasons = ["" if ok else "low_score_mass" for ok in valid]
    prediction = Prediction(scores=mean, std=std, valid=valid, reasons=reasons)
    return as_prediction(prediction, n=mean.shape[0], score_range=bins.score_range)


def prediction_from_generations(texts: Sequence[str], bins: ScoreBins) -> Prediction:
    """Generate-and-parse prediction: the first number of each text, read as a score token."""
    scores, reasons = bins.parse(texts)
    valid = np.array([reason == "" for reason in reasons], dtype=bool)
    prediction = Prediction(scores=np.asarray(scores), std=None, valid=valid, reasons=reasons)
    return as_prediction(prediction, n=len(scores), score_range=bins.score_range)


def _softmax_rows(log_probs: np.ndarray) -> np.ndarray:
    """Each row renormalised into probabilities; a row with no finite entry is uniform."""
    top = np.max(log_probs, axis=1, keepdims=True)
    seen = np.isfinite(top)
    weights = np.where(seen, np.exp(log_probs - np.where(seen, top, 0.0)), 1.0)
    return weights / weights.sum(axis=1, keepdims=True)


class PromptScorer(abc.ABC):
    """The shared front of the language-model backends: options, prompts, :meth:`predict`,
    :meth:`update` (online learning and std calibration) and :meth:`calibrate`.

    Subclasses load a model, set :attr:`score_token_ids` (from
    :meth:`ScorePrompt.score_token_ids`), a ``tokenizer`` and implement :meth:`token_log_probs`,
    :meth:`generate` and :meth:`learn`.

    The std of expectation mode is the spread of the score-token distribution scaled by
    :attr:`std_calibration` (:class:`~wmrl_env.world_models.conformal_std.ConformalStd`), fitted
    by split conformal calibration on :attr:`calibration_set`: anchors :meth:`update` holds out
    of training (``holdout_fraction`` of them) and pairs given to :meth:`calibrate`, their
    residuals recomputed under the current model after every update. Until
    ``min_residuals`` pairs are in, the raw spread passes unchanged.

    Args:
        prompt: template and score vocabulary; default :class:`ScorePrompt`.
        mode: ``"expectation"`` (one forward pass, expectation over the score tokens) or
            ``"generate"`` (greedy answer, parsed).
        max_length: prompt tokens kept (the beginning is cut when longer).
        min_score_mass: expectation mode flags items with less probability on the score tokens.
        max_new_tokens: generate mode's answer length.
        calibration: the std's conformal calibration; default ``ConformalStd()`` with floors
            of 0, 1, 3 and 10 % of the score range.
        holdout_fraction: share of anchor prompts :meth:`update` keeps out of training to
            calibrate the std on (the calibration set holds ``calibration.window`` pairs).
    """

    score_token_ids: list[int]

    def __init__(
        self,
        *,
        prompt: ScorePrompt | None = None,
        mode: str = "expectation",
        max_length: int = 1024,
        min_score_mass: float = 0.1,
        max_new_tokens: int = 4,
        calibration: ConformalStd | None = None,
        holdout_fraction: float = 0.2,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if max_length < 8 or max_new_tokens < 1:
            raise ValueError("max_length must be >= 8 and max_new_tokens >= 1")
        if not 0.0 <= min_score_mass <= 1.0:
            raise ValueError(f"min_score_mass must lie in [0, 1], got {min_score_mass}")
        self.prompt = prompt if prompt is not None else ScorePrompt()
        #: the status question of :meth:`predict_outcomes` (replace it to ask otherwise)
        self.status_prompt = StatusPrompt()
        self.pre_gate = PreGate()
        self._status_ids: tuple[StatusPrompt, list[int]] | None = None
        self.mode = mode
        self.max_length = max_length
        self.min_score_mass = min_score_mass
        self.max_new_tokens = max_new_tokens
        low, high = self.prompt.bins.score_range
        self.std_calibration = calibration or ConformalStd(
            floors=tuple(f * (high - low) for f in (0.0, 0.01, 0.03, 0.1))
        )
        if not 0.0 <= holdout_fraction < 1.0:
            raise ValueError(f"holdout_fraction must lie in [0, 1), got {holdout_fraction}")
        self.holdout_fraction = holdout_fraction
        #: held-out (prompt, real score) pairs the std is calibrated on, newest last
        self.calibration_set: deque[tuple[str, float]] = deque(maxlen=self.std_calibration.window)
        self.last_update: Any = None

    def predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> Prediction:
        """Scores for a batch; calibrated std (expectation mode) and per-item validity."""
        raw = self.predict_raw(contexts, artifacts)
        if raw.std is None:
            return raw
        std = self.std_calibration.apply(raw.std)
        return Prediction(scores=raw.scores, std=std, valid=raw.valid, reasons=raw.reasons)

    def predict_outcomes(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], failure_score: float | None = None
    ) -> OutcomePrediction:
        """The prediction contract: the score given ``ok`` and its std are :meth:`predict`'s;
        the status probabilities are the next-token probabilities of :attr:`status_prompt`'s
        tokens, renormalised over them (constrained status tokens; one more forward pass);
        the pre-gate answers its certain cases exactly. ``failure_score`` defaults to the
        score range's low end."""
        prediction = self.predict(contexts, artifacts)
        _, artifact_texts = check_batch(contexts, artifacts)
        answer = self.pre_gate.answer(artifact_texts)
        log_probs = self.token_log_probs(
            self.status_prompt.render_batch(contexts, artifacts), self.status_token_ids()
        )
        weights = _softmax_rows(log_probs)
        probs = np.zeros((len(artifact_texts), len(STATUSES)))
        for column, status in enumerate(self.status_prompt.statuses):
            probs[:, STATUSES.index(status)] = weights[:, column]
        score = np.where(prediction.valid, prediction.scores, np.nan)
        std = prediction.std if prediction.std is not None else np.full(len(score), np.nan)
        low = self.prompt.bins.score_range[0]
        failure = low if failure_score is None else float(failure_score)
        return combine_with_gate(answer, probs, score, std, failure)

    def status_token_ids(self) -> list[int]:
        """Token ids of :attr:`status_prompt`'s tokens (checked once per prompt)."""
        if self._status_ids is None or self._status_ids[0] is not self.status_prompt:
            ids = self.status_prompt.token_ids(self.tokenizer)
            self._status_ids = (self.status_prompt, ids)
        return self._status_ids[1]

    def predict_raw(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> Prediction:
        """As :meth:`predict`, with the score-token distribution's own spread as the std."""
        prompts = self.prompt.render_batch(contexts, artifacts)
        if self.mode == "generate":
            return prediction_from_generations(self.generate(prompts), self.prompt.bins)
        log_probs = self.score_log_probs(prompts)
        return prediction_from_log_probs(log_probs, self.prompt.bins, self.min_score_mass)

    def update(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
    ) -> Any:
        """Learn from anchors: a ``holdout_fraction`` of prompts (chosen by a hash of the
        prompt, so a repeated program always falls on the same side) joins the std's
        calibration set, :meth:`learn` trains on the rest, then the std is recalibrated on
        the calibration set's residuals under the updated model. Returns what :meth:`learn`
        reports (``None`` when every anchor was held out).

        NaN real scores (failed executions) are skipped and a batch without a score is a
        no-op (returns ``None``); a wrong length, infinity or a score outside the score range
        raises ``ValueError`` before anything changes.
        """
        prompts, real = self._scored(contexts, artifacts, real_scores)
        if not prompts:
            return None
        held = held_out_mask(prompts, self.holdout_fraction)
        report = None
        if not held.all():
            train = [p for p, h in zip(prompts, held, strict=True) if not h]
            report = self.learn(train, self.prompt.bins.soft_targets(real[~held]))
        self.calibration_set.extend(
            (p, float(r)) for p, r, h in zip(prompts, real, held, strict=True) if h
        )
        self.recalibrate()
        self.last_update = report
        return report

    def calibrate(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
    ) -> tuple[float, float]:
        """Add held-out pairs to the std's calibration set without learning from them (split
        conformal) and recalibrate; returns the set's coverage of +-1 and +-1.96 std."""
        prompts, real = self._scored(contexts, artifacts, real_scores)
        self.calibration_set.extend(zip(prompts, real.tolist(), strict=True))
        self.recalibrate()
        return self.std_calibration.coverage()

    def recalibrate(self) -> None:
        """Refit the std's scale on the calibration set's residuals under the current model
        (one forward pass over the set; nothing to do in generate mode)."""
        if self.mode == "generate" or not self.calibration_set:
            return
        prompts, real = zip(*self.calibration_set, strict=True)
        raw = prediction_from_log_probs(
            self.score_log_probs(list(prompts)), self.prompt.bins, self.min_score_mass
        )
        self.std_calibration.reset()
        valid = raw.valid
        self.std_calibration.add(np.abs(np.array(real) - raw.scores)[valid], raw.std[valid])

    def state_dict(self) -> dict[str, Any]:
        """The std calibration and its held-out set, as plain data."""
        return {
            "calibration": self.std_calibration.state_dict(),
            "calibration_set": [list(pair) for pair in self.calibration_set],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.std_calibration.load_state_dict(state["calibration"])
        self.calibration_set.clear()
        self.calibration_set.extend((prompt, real) for prompt, real in state["calibration_set"])

    def _scored(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
    ) -> tuple[list[str], np.ndarray]:
        """Prompts and real scores of the items that carry a score (checked, see update)."""
        prompts = self.prompt.render_batch(contexts, artifacts)
        real, keep = check_real_scores(real_scores, len(prompts), self.prompt.bins.score_range)
        return [p for p, k in zip(prompts, keep, strict=True) if k], real[keep]

    def score_log_probs(self, prompts: Sequence[str]) -> np.ndarray:
        """Next-token log-probabilities of the score tokens, shape ``(len(prompts), n)``."""
        return self.token_log_probs(prompts, self.score_token_ids)

    @abc.abstractmethod
    def token_log_probs(self, prompts: Sequence[str], token_ids: Sequence[int]) -> np.ndarray:
        """Next-token log-probabilities of ``token_ids`` after each prompt, shape
        ``(len(prompts), len(token_ids))``."""

    @abc.abstractmethod
    def generate(self, prompts: Sequence[str]) -> list[str]:
        """Greedy answers (new tokens only, decoded) for each prompt."""

    @abc.abstractmethod
    def learn(self, prompts: list[str], targets: np.ndarray) -> Any:
        """Train on prompts and their soft targets over the score tokens (one online step)."""
