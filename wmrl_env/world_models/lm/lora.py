"""LoRA fine-tuning of a :class:`~wmrl_env.world_models.lm.causal_lm.CausalLMScorer` on
execution logs.

The loss is the cross-entropy between the model's next-token distribution (over the whole
vocabulary) and a soft target on the score tokens whose expectation is the real score
(:meth:`~wmrl_env.world_models.lm.score_bins.ScoreBins.soft_targets`): it teaches the model to
answer with a score token and to put its mass where the real score lies. Only the LoRA
matrices train (``peft``); the base weights stay frozen.

Example (needs the ``lora`` extra)::

    scorer = CausalLMScorer(model_dir)
    report = finetune_lora(scorer, contexts, artifacts, scores, LoraTrainingConfig(epochs=2))
    report.eval_loss_before, report.eval_loss_after
    scorer.save("runs/wm-lora")          # adapter + scorer config
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from wmrl_env.utils.imports import require
from wmrl_env.world_models.lm.prompting import ScorePrompt


class TunableScorer(Protocol):
    """What LoRA training needs of a scorer (a
    :class:`~wmrl_env.world_models.lm.causal_lm.CausalLMScorer`): its model, its prompt, the
    score tokens and the next-token log-probabilities of an encoded batch."""

    model: Any
    prompt: ScorePrompt
    score_token_ids: list[int]

    def encode(self, prompts: Sequence[str]) -> Any: ...

    def next_token_log_probs(self, batch: Any) -> Any: ...


__all__ = [
    "ALL_LINEAR",
    "LoraTrainingConfig",
    "TrainingReport",
    "add_lora_adapters",
    "finetune_lora",
    "score_loss",
    "soft_target_loss",
]

#: the linear layers of Qwen / Llama blocks: adapters on all of them by default
ALL_LINEAR: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)


@dataclass
class LoraTrainingConfig:
    """Settings of a LoRA fine-tuning run (also the ``wmrl train-world-model`` options)."""

    rank: int = field(default=8, metadata={"help": "LoRA rank r"})
    alpha: float = field(default=16.0, metadata={"help": "LoRA scaling alpha"})
    dropout: float = field(default=0.0, metadata={"help": "dropout on the LoRA input"})
    target_modules: tuple[str, ...] = field(
        default=ALL_LINEAR,
        metadata={"help": "names of the linear layers that get adapters (all of Qwen/Llama's)"},
    )
    learning_rate: float = field(default=2e-4, metadata={"help": "AdamW learning rate"})
    epochs: int = field(default=1, metadata={"help": "passes over the training pairs"})
    batch_size: int = field(default=8, metadata={"help": "pairs per optimizer step"})
    eval_fraction: float = field(
        default=0.1, metadata={"help": "share of the log held out to report the loss on"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the split, shuffling and LoRA init"})

    def __post_init__(self) -> None:
        if self.rank < 1 or self.epochs < 1 or self.batch_size < 1:
            raise ValueError("rank, epochs and batch_size must be >= 1")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must lie in [0, 1), got {self.eval_fraction}")
        self.target_modules = tuple(self.target_modules)


@dataclass
class TrainingReport:
    """What a fine-tuning run did: per-step training losses and held-out loss before/after."""

    losses: list[float]
    eval_loss_before: float
    eval_loss_after: float
    n_train: int
    n_eval: int


def soft_target_loss(scorer: TunableScorer, prompts: list[str], targets: np.ndarray) -> Any:
    """Mean cross-entropy (a torch scalar) between the full-vocabulary next-token distribution
    and ``targets``, distributions over the score tokens, shape ``(len(prompts), n)``."""
    torch = require("torch")
    batch = scorer.encode(prompts)
    log_probs = scorer.next_token_log_probs(batch)[:, scorer.score_token_ids]
    targets = torch.as_tensor(np.asarray(targets), dtype=log_probs.dtype)
    return -(targets.to(log_probs.device) * log_probs).sum(dim=1).mean()


def _score_loss_of(scorer: TunableScorer, prompts: list[str], scores: np.ndarray) -> Any:
    return soft_target_loss(scorer, prompts, scorer.prompt.bins.soft_targets(scores))


def add_lora_adapters(
    scorer: TunableScorer,
    rank: int,
    alpha: float,
    target_modules: Sequence[str] = ALL_LINEAR,
    dropout: float = 0.0,
    seed: int = 0,
) -> None:
    """Wrap ``scorer.model`` with fresh LoRA adapters (a no-op when it already has some).

    The adapters' B matrices start at zero, so predictions are unchanged until a step; their
    A matrices are drawn under ``seed`` without touching torch's global random state.
    """
    torch = require("torch", "LoRA fine-tuning")
    peft = require("peft", "LoRA fine-tuning")
    if hasattr(scorer.model, "peft_config"):
        return
    lora = peft.LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(target_modules),
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        scorer.model = peft.get_peft_model(scorer.model, lora)


def score_loss(
    scorer: TunableScorer,
    contexts: Sequence[Any],
    artifacts: Sequence[Any],
    scores: np.ndarray,
    batch_size: int = 16,
) -> float:
    """Mean soft-target cross-entropy of ``scorer`` on a log (no gradient)."""
    torch = require("torch")
    prompts = scorer.prompt.render_batch(contexts, artifacts)
    scores = np.asarray(scores, dtype=np.float64)
    total = 0.0
    with torch.inference_mode():
        for start in range(0, len(prompts), batch_size):
            part = slice(start, start + batch_size)
            loss = _score_loss_of(scorer, prompts[part], scores[part])
            total += float(loss) * len(prompts[part])
    return total / max(len(prompts), 1)


def finetune_lora(
    scorer: TunableScorer,
    contexts: Sequence[Any],
    artifacts: Sequence[Any],
    scores: np.ndarray,
    config: LoraTrainingConfig | None = None,
) -> TrainingReport:
    """Fine-tune LoRA adapters of ``scorer.model`` in place on (context, artifact, score) pairs.

    A model that already carries adapters keeps training them. Raises ``ValueError`` on NaN or
    out-of-range scores (before any training) and on a log too small to split.
    """
    torch = require("torch", "LoRA fine-tuning")
    require("peft", "LoRA fine-tuning")
    config = config or LoraTrainingConfig()
    prompts = scorer.prompt.render_batch(contexts, artifacts)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if scores.shape[0] != len(prompts):
        raise ValueError(f"got {scores.shape[0]} scores for {len(prompts)} pairs")
    scorer.prompt.bins.soft_targets(scores)  # validates every score up front
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(prompts))
    n_eval = round(config.eval_fraction * len(prompts))
    if len(prompts) - n_eval < 1 or (config.eval_fraction > 0 and n_eval < 1):
        raise ValueError(
            f"{len(prompts)} pairs are too few for eval_fraction={config.eval_fraction}"
        )
    eval_idx, train_idx = order[:n_eval], order[n_eval:]
    eval_set = ([contexts[i] for i in eval_idx], [artifacts[i] for i in eval_idx], scores[eval_idx])
    eval_before = score_loss(scorer, *eval_set) if n_eval else float("nan")

    add_lora_adapters(
        scorer, config.rank, config.alpha, config.target_modules, config.dropout, config.seed
    )
    trainable = [p for p in scorer.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.learning_rate, weight_decay=0.0)

    losses: list[float] = []
    scorer.model.train()
    try:
        for _ in range(config.epochs):
            for start in range(0, len(train_idx), config.batch_size):
                idx = train_idx[start : start + config.batch_size]
                loss = _score_loss_of(scorer, [prompts[i] for i in idx], scores[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(float(loss.detach()))
            train_idx = rng.permutation(train_idx)
    finally:
        scorer.model.eval()
    eval_after = score_loss(scorer, *eval_set) if n_eval else float("nan")
    return TrainingReport(losses, eval_before, eval_after, len(train_idx), n_eval)
