"""Online learning of a causal-LM scorer from anchors: a bounded LoRA step per update.

Each :meth:`~wmrl_env.world_models.lm.prompting.PromptScorer.update` hands this round's anchor
prompts and their soft targets (the score tokens whose expectation is the real score) to
:meth:`OnlineLoraLearner.learn`, which

* merges them into an :class:`~wmrl_env.world_models.lm.anchor_memory.AnchorMemory` (a repeated
  program averages its targets instead of taking another slot);
* runs at most ``steps`` AdamW steps on LoRA adapters only (added on first use, zero-initialised
  so the first prediction is the base model's), each on a batch of this round's anchors plus a
  ``replay_fraction`` of past ones from the memory, and stops early once ``max_seconds`` have
  passed (at least one step always runs);
* clips the gradient norm, and restores the adapters, the optimizer and the memory as they
  were before the call when a loss or a weight turns non-finite (then raises
  ``RuntimeError``): a failed update never leaves a corrupted model behind.

Example (needs the ``lora`` extra)::

    scorer = CausalLMScorer(model_dir, online=OnlineLoraConfig(steps=4, learning_rate=2e-4))
    scorer.update(contexts, artifacts, real_scores)  # anchors of this round
    scorer.last_update.seconds, scorer.last_update.trainable_parameters
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.utils.imports import require
from wmrl_env.world_models.lm.anchor_memory import AnchorMemory
from wmrl_env.world_models.lm.lora import (
    ALL_LINEAR,
    TunableScorer,
    add_lora_adapters,
    soft_target_loss,
)

__all__ = ["OnlineLoraConfig", "OnlineLoraLearner", "OnlineUpdateReport"]


@dataclass
class OnlineLoraConfig:
    """Settings of the LM scorers' online learning from anchors (one update = one call)."""

    rank: int = field(default=8, metadata={"help": "LoRA rank r"})
    alpha: float = field(default=16.0, metadata={"help": "LoRA scaling alpha"})
    target_modules: tuple[str, ...] = field(
        default=ALL_LINEAR, metadata={"help": "linear layers that get adapters"}
    )
    learning_rate: float = field(
        default=2e-4, metadata={"help": "AdamW learning rate (as finetune_lora; tune per model)"}
    )
    steps: int = field(default=4, metadata={"help": "optimizer steps per update, at most"})
    batch_size: int = field(default=16, metadata={"help": "anchor pairs per step"})
    replay_fraction: float = field(
        default=0.5, metadata={"help": "share of each batch replayed from past anchors"}
    )
    max_seconds: float = field(
        default=30.0, metadata={"help": "no new step starts after this long in one update"}
    )
    memory_size: int = field(default=1024, metadata={"help": "distinct anchor prompts kept"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient norm clip"})
    seed: int = field(default=0, metadata={"help": "LoRA init and batch draws"})

    def __post_init__(self) -> None:
        if min(self.rank, self.steps, self.batch_size, self.memory_size) < 1:
            raise ValueError("rank, steps, batch_size and memory_size must be >= 1")
        for name in ("learning_rate", "max_seconds", "max_grad_norm"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive and finite, got {value}")
        if not 0.0 <= self.replay_fraction < 1.0:
            raise ValueError(f"replay_fraction must lie in [0, 1), got {self.replay_fraction}")
        self.target_modules = tuple(self.target_modules)


@dataclass(frozen=True)
class OnlineUpdateReport:
    """What one online update did."""

    n_pairs: int  #: anchor pairs given to this update
    n_memory: int  #: distinct anchor prompts in the memory after it
    steps: int  #: optimizer steps run (< config.steps when max_seconds stopped it)
    seconds: float  #: wall time of the steps
    losses: tuple[float, ...]  #: each step's batch loss, before its step
    replayed: int  #: pairs drawn from past anchors, summed over the steps
    trainable_parameters: int  #: LoRA parameters the steps changed


class OnlineLoraLearner:
    """The state of online learning: the anchor memory, the optimizer and the batch draws."""

    def __init__(self, config: OnlineLoraConfig | None = None) -> None:
        self.config = config or OnlineLoraConfig()
        self.memory = AnchorMemory(self.config.memory_size)
        self._rng = np.random.default_rng(self.config.seed)
        self._optimizer: Any = None
        self._model: Any = None  # the model the optimizer's parameters belong to

    def learn(
        self, scorer: TunableScorer, prompts: Sequence[str], targets: np.ndarray
    ) -> OnlineUpdateReport:
        """Merge the anchors into the memory and take at most ``steps`` LoRA steps."""
        torch = require("torch", "online learning")
        config = self.config
        params = self._trainable(scorer)
        saved = (
            [p.detach().clone() for p in params],
            copy.deepcopy(self._optimizer.state_dict()),
            self.memory.state_dict(),
            copy.deepcopy(self._rng.bit_generator.state),
        )
        added = self.memory.add(list(prompts), targets)
        new = [key for key in dict.fromkeys(added) if key in self.memory]  # a small memory evicts
        fresh_keys = set(new)
        old = [key for key in self.memory if key not in fresh_keys]
        n_new = (
            len(new) if not old else max(1, round(config.batch_size * (1 - config.replay_fraction)))
        )
        n_new = min(n_new, config.batch_size, len(new))
        order = [new[i] for i in self._rng.permutation(len(new))]
        losses: list[float] = []
        replayed = 0
        start = time.perf_counter()
        scorer.model.train()
        try:
            for step in range(config.steps):
                if step and time.perf_counter() - start >= config.max_seconds:
                    break
                fresh = [order[(step * n_new + i) % len(order)] for i in range(n_new)]
                n_old = min(config.batch_size - n_new, len(old))
                replay = [old[i] for i in self._rng.choice(len(old), n_old, replace=False)]
                keys = list(dict.fromkeys(fresh)) + replay
                replayed += len(replay)
                loss = soft_target_loss(
                    scorer, self.memory.prompts(keys), self.memory.targets(keys)
                )
                loss_value = float(loss.detach())
                if not math.isfinite(loss_value):
                    raise FloatingPointError(f"loss is {loss_value} at step {step}")
                self._optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
                self._optimizer.step()
                losses.append(loss_value)
            if not all(bool(torch.isfinite(p).all()) for p in params):
                raise FloatingPointError("a LoRA weight is not finite after the steps")
        except FloatingPointError as error:
            self._restore(params, *saved)
            raise RuntimeError(
                f"online update abandoned, model restored as before it: {error} "
                f"(learning_rate={config.learning_rate} may be too high)"
            ) from error
        finally:
            scorer.model.eval()
        return OnlineUpdateReport(
            n_pairs=len(prompts),
            n_memory=len(self.memory),
            steps=len(losses),
            seconds=time.perf_counter() - start,
            losses=tuple(losses),
            replayed=replayed,
            trainable_parameters=sum(p.numel() for p in params),
        )

    def _trainable(self, scorer: TunableScorer) -> list[Any]:
        """The LoRA parameters (adding adapters on first use) and an optimizer over them."""
        torch = require("torch", "online learning")
        config = self.config
        add_lora_adapters(
            scorer, config.rank, config.alpha, config.target_modules, 0.0, config.seed
        )
        params = [p for p in scorer.model.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("the scorer's adapters are frozen: load them with is_trainable=True")
        if self._optimizer is None or self._model is not scorer.model:
            self._optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=0.0)
            self._model = scorer.model
        return params

    def _restore(
        self,
        params: list[Any],
        weights: list[Any],
        optimizer: dict[str, Any],
        memory: dict[str, Any],
        rng: dict[str, Any],
    ) -> None:
        torch = require("torch")
        with torch.no_grad():
            for param, weight in zip(params, weights, strict=True):
                param.copy_(weight)
        self._optimizer.load_state_dict(optimizer)
        self.memory.load_state_dict(memory)
        self._rng.bit_generator.state = rng

    def state_dict(self) -> dict[str, Any]:
        """The memory and the draw state, as plain data (see :meth:`training_state` for the
        adapters and the optimizer)."""
        return {"memory": self.memory.state_dict(), "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.memory.load_state_dict(state["memory"])
        self._rng.bit_generator.state = state["rng"]

    def training_state(self, scorer: TunableScorer) -> dict[str, Any]:
        """The LoRA weights and the optimizer's state (torch tensors, copied), ``None`` each
        before the first update: with :meth:`state_dict`, what resumes learning exactly."""
        if self._optimizer is None or self._model is not scorer.model:
            return {"adapters": None, "optimizer": None}
        peft = require("peft", "online learning")
        weights = peft.get_peft_model_state_dict(scorer.model)
        return {
            "adapters": {name: tensor.detach().clone() for name, tensor in weights.items()},
            "optimizer": copy.deepcopy(self._optimizer.state_dict()),
        }

    def load_training_state(self, scorer: TunableScorer, state: dict[str, Any]) -> None:
        """Restore what :meth:`training_state` returned into ``scorer`` (same base model)."""
        if state["adapters"] is None:
            return
        peft = require("peft", "online learning")
        self._trainable(scorer)  # adds the adapters and the optimizer if missing
        peft.set_peft_model_state_dict(scorer.model, state["adapters"])
        if state["optimizer"] is not None:
            self._optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
