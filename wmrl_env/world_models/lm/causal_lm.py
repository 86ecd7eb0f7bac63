"""A causal language model as a world model (transformers): it reads the task and the artifact
and answers with a score token.

Two modes:

* ``"expectation"`` (default): one forward pass per batch; the score is the expectation over the
  score tokens' next-token probabilities, the std their spread
  (:func:`~wmrl_env.world_models.lm.prompting.prediction_from_log_probs`). Items whose probability
  mass on the score tokens is below ``min_score_mass`` are flagged, not trusted.
* ``"generate"``: greedy generation of a few tokens, parsed
  (:func:`~wmrl_env.world_models.lm.prompting.prediction_from_generations`); unparseable or
  out-of-range answers are flagged.

Batches are left-padded (explicit position ids, so padding does not shift the positions) and
sorted by length. Prompts longer than ``max_length`` tokens lose their beginning, never the
artifact's end or the question. LoRA adapters trained by
:func:`~wmrl_env.world_models.lm.lora.finetune_lora` are saved and loaded with the scorer.

Online (:meth:`~wmrl_env.world_models.lm.prompting.PromptScorer.update`, the world-model contract):
a share of each round's anchors is held out to calibrate the std
(:class:`~wmrl_env.world_models.conformal_std.ConformalStd`), the rest train a bounded LoRA
step (:class:`~wmrl_env.world_models.lm.online_lora.OnlineLoraLearner`; needs the ``lora`` extra).

Example (needs the ``transformers`` extra)::

    scorer = CausalLMScorer("Qwen/Qwen2.5-0.5B-Instruct-local-dir")
    prediction = scorer.predict(["Sort a list."], ["def solve(x): return sorted(x)"])
    scorer.update(["Sort a list."], ["def solve(x): return sorted(x)"], np.array([1.0]))
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.utils.imports import require
from wmrl_env.world_models.conformal_std import ConformalStd
from wmrl_env.world_models.lm.online_lora import (
    OnlineLoraConfig,
    OnlineLoraLearner,
    OnlineUpdateReport,
)
from wmrl_env.world_models.lm.prompting import MODES, PromptScorer, ScorePrompt
from wmrl_env.world_models.lm.score_bins import ScoreBins

__all__ = ["MODES", "CausalLMScorer"]

_CONFIG_FILE = "wmrl_scorer.json"
_ONLINE_FILE = "wmrl_online.json"


class CausalLMScorer(PromptScorer):
    """Scores (context, artifact) pairs with a causal LM loaded from a local directory.

    Args:
        model_path: a local model directory (or hub id where a hub is reachable).
        prompt: template and score vocabulary; default :class:`ScorePrompt`.
        mode: ``"expectation"`` or ``"generate"``.
        batch_size: prompts per forward pass.
        max_length: prompt tokens kept (the beginning is cut when longer).
        min_score_mass: expectation mode flags items with less probability on the score tokens.
        max_new_tokens: generate mode's answer length.
        device: torch device string.
        dtype: torch dtype name (``"float32"``, ``"bfloat16"``, ...); default the model's own.
        adapter_path: a LoRA adapter directory to apply (see :meth:`save`).
        online: settings of online learning in :meth:`update`; default
            :class:`~wmrl_env.world_models.lm.online_lora.OnlineLoraConfig`.
        calibration, holdout_fraction: the std's conformal calibration and the share of
            anchors kept out of training for it (see :class:`PromptScorer`).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        prompt: ScorePrompt | None = None,
        mode: str = "expectation",
        batch_size: int = 16,
        max_length: int = 1024,
        min_score_mass: float = 0.1,
        max_new_tokens: int = 4,
        device: str = "cpu",
        dtype: str | None = None,
        adapter_path: str | os.PathLike[str] | None = None,
        online: OnlineLoraConfig | None = None,
        calibration: ConformalStd | None = None,
        holdout_fraction: float = 0.2,
    ) -> None:
        super().__init__(
            prompt=prompt,
            mode=mode,
            max_length=max_length,
            min_score_mass=min_score_mass,
            max_new_tokens=max_new_tokens,
            calibration=calibration,
            holdout_fraction=holdout_fraction,
        )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        torch = require("torch", "CausalLMScorer")
        transformers = require("transformers", "CausalLMScorer")
        self.model_path = str(model_path)
        local = os.path.isdir(self.model_path)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(
            self.model_path, local_files_only=local
        )
        self.tokenizer.padding_side = "left"
        self.tokenizer.truncation_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            self.model_path,
            local_files_only=local,
            dtype=getattr(torch, dtype) if dtype else "auto",
        ).to(device)
        if adapter_path is not None:
            peft = require("peft", "loading a LoRA adapter")
            self.model = peft.PeftModel.from_pretrained(
                self.model, str(adapter_path), is_trainable=True
            )  # trainable: update() keeps learning it
        self.model.eval()
        self.score_token_ids = self.prompt.score_token_ids(self.tokenizer)
        self.batch_size = batch_size
        self.device = device
        self.learner = OnlineLoraLearner(online)

    def learn(self, prompts: list[str], targets: np.ndarray) -> OnlineUpdateReport:
        """One bounded online LoRA update (see :class:`OnlineLoraLearner`)."""
        return self.learner.learn(self, prompts, targets)

    # ---------------------------------------------------------------- prediction
    def token_log_probs(self, prompts: Sequence[str], token_ids: Sequence[int]) -> np.ndarray:
        torch = require("torch")
        ids = list(token_ids)
        out = np.empty((len(prompts), len(ids)))
        with torch.inference_mode():
            for chunk, batch in self._batches(prompts):
                log_probs = self.next_token_log_probs(batch)
                out[chunk] = log_probs[:, ids].double().cpu().numpy()
        return out

    def generate(self, prompts: Sequence[str]) -> list[str]:
        torch = require("torch")
        out: list[str] = [""] * len(prompts)
        with torch.inference_mode():
            for chunk, batch in self._batches(prompts):
                generated = self.model.generate(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
                new_tokens = generated[:, batch["input_ids"].shape[1] :]
                texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
                for i, text in zip(chunk, texts, strict=True):
                    out[i] = text
        return out

    def encode(self, prompts: Sequence[str]) -> dict[str, Any]:
        """Left-padded, left-truncated tensors with position ids that ignore the padding."""
        batch = self.tokenizer(
            list(prompts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            add_special_tokens=False,
            return_tensors="pt",
        ).to(self.device)
        batch["position_ids"] = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
        return dict(batch)

    def next_token_log_probs(self, batch: dict[str, Any]) -> Any:
        """Log-softmax over the vocabulary at the last prompt position (a torch tensor)."""
        torch = require("torch")
        logits = self.model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
            logits_to_keep=1,
        ).logits[:, -1, :]
        return torch.log_softmax(logits.float(), dim=-1)

    def _batches(self, prompts: Sequence[str]):
        lengths = [len(p) for p in prompts]
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(prompts), self.batch_size):
            chunk = order[start : start + self.batch_size]
            yield chunk, self.encode([prompts[i] for i in chunk])

    # --------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str], *, merge: bool = False) -> Path:
        """Save the scorer's configuration and, for a LoRA-tuned model, its adapter.

        With ``merge=True`` the adapter is merged into the weights and the whole model and
        tokenizer are written (a plain model directory, loadable by vLLM too).
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        is_peft = hasattr(self.model, "peft_config")
        if merge and is_peft:
            self.model = self.model.merge_and_unload()
            is_peft = False
        if merge:
            self.model.save_pretrained(str(path))
            self.tokenizer.save_pretrained(str(path))
        elif is_peft:
            self.model.save_pretrained(str(path))
        config = {
            "base_model": str(path) if merge else self.model_path,
            "adapter": is_peft and not merge,
            "template": self.prompt.template,
            "tokens": list(self.prompt.bins.tokens),
            "score_range": list(self.prompt.bins.score_range),
            "mode": self.mode,
            "max_length": self.max_length,
            "min_score_mass": self.min_score_mass,
        }
        (path / _CONFIG_FILE).write_text(json.dumps(config, indent=2))
        (path / _ONLINE_FILE).write_text(json.dumps(self._online_state()))
        return path

    def _online_state(self) -> dict[str, Any]:
        """The anchor memory, the std calibration and its held-out set, the online settings,
        as JSON data (the adapters are saved with the model; the optimizer is not saved)."""

        def plain(value: Any) -> Any:
            if isinstance(value, dict):
                return {key: plain(item) for key, item in value.items()}
            return value.tolist() if isinstance(value, np.ndarray) else value

        return plain(
            {
                **PromptScorer.state_dict(self),
                "learner": self.learner.state_dict(),
                "holdout_fraction": self.holdout_fraction,
                "online": {**vars(self.learner.config)},
                "window": self.std_calibration.window,
                "min_residuals": self.std_calibration.min_residuals,
                "floors": list(self.std_calibration.floors),
            }
        )

    def state_dict(self) -> dict[str, Any]:
        """Everything online learning changed: the LoRA weights and the optimizer's state
        (``None`` before the first update), the anchor memory and draw state, the std
        calibration and its held-out set. With :meth:`load_state_dict` on a scorer of the
        same base model and settings, learning resumes exactly (checkpoints of
        :class:`~wmrl_env.integrations.trl.WMRLGRPOTrainer` use it)."""
        return {
            **super().state_dict(),
            "learner": self.learner.state_dict(),
            **self.learner.training_state(self),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.learner.load_training_state(self, state)
        self.learner.load_state_dict(state["learner"])
        super().load_state_dict(state)

    @classmethod
    def load(cls, path: str | os.PathLike[str], **overrides: Any) -> CausalLMScorer:
        """Rebuild a scorer written by :meth:`save`; keyword arguments override saved ones."""
        path = Path(path)
        config = json.loads((path / _CONFIG_FILE).read_text())
        bins = ScoreBins(score_range=tuple(config["score_range"]), tokens=tuple(config["tokens"]))
        kwargs: dict[str, Any] = {
            "prompt": ScorePrompt(template=config["template"], bins=bins),
            "mode": config["mode"],
            "max_length": config["max_length"],
            "min_score_mass": config["min_score_mass"],
            "adapter_path": path if config["adapter"] else None,
        }
        online = path / _ONLINE_FILE
        state = json.loads(online.read_text()) if online.is_file() else None
        if state is not None:
            kwargs["online"] = OnlineLoraConfig(**state["online"])
            kwargs["calibration"] = ConformalStd(
                state["window"], state["min_residuals"], tuple(state["floors"])
            )
            kwargs["holdout_fraction"] = state["holdout_fraction"]
        kwargs.update(overrides)
        scorer = cls(config["base_model"], **kwargs)
        if state is not None:
            scorer.learner.load_state_dict(state["learner"])
            PromptScorer.load_state_dict(scorer, state)
        return scorer
