"""``WMRLRewardManager``: verl's reward manager for world-model rewards with real anchors.

verl calls :meth:`WMRLRewardManager.run_single` once per sample, in several reward-loop
workers at once. Per sample it

1. asks the world model (concurrent samples of a worker are batched into one ``predict``),
2. if the sample's group is an anchor (:func:`~wmrl_env.integrations.verl.ledger.anchor_draw`
   of its ``uid``: the same answer in every worker, so groups are anchored whole), starts the
   real execution *before* waiting for the world model, so both run at the same time,
3. files a :class:`~wmrl_env.integrations.verl.ledger.SampleRecord` for the advantage step,
4. returns ``reward_score``: the real score on executed anchors, the world-model score
   elsewhere, NaN for a failed execution or an invalid prediction (what verl logs as
   ``critic/score``).

Subclass it, set the class attributes and build the world model, executor and jobs::

    class MyReward(WMRLRewardManager):
        anchor_fraction = 0.1
        seed = 0

        def build_world_model(self):
            return EmbeddingRegressor.load("wm/")

        def build_executor(self):
            return LocalSandbox()

        def to_job(self, prompt, response, row):
            return make_job(row["extra_info"]["task_id"], response)
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecResult, Executor
from wmrl_env.integrations.verl.ledger import SampleRecord, anchor_draw, default_ledger
from wmrl_env.utils.imports import require
from wmrl_env.world_models.base import WorldModel, as_prediction

_base = require("verl.experimental.reward_loop.reward_manager.base", "the verl integration")

__all__ = ["WMRLRewardManager"]


def _text(item: Any) -> str:
    """A raw prompt (a string or chat messages) as text."""
    if isinstance(item, str):
        return item
    if isinstance(item, Sequence | np.ndarray) and all(isinstance(m, Mapping) for m in item):
        return "\n".join(str(message.get("content", "")) for message in item)
    return str(item)


class _PredictionBatcher:
    """Collects the predictions a worker's concurrent samples ask for into one ``predict``."""

    def __init__(
        self, world_model: WorldModel, score_range: tuple[float, float] | None, wait_s: float
    ) -> None:
        self.world_model = world_model
        self.score_range = score_range
        self.wait_s = wait_s
        self._pending: list[tuple[Any, Any, asyncio.Future]] = []
        self._lock = asyncio.Lock()
        self._flushing: asyncio.Task | None = None
        self.calls = 0

    async def predict(self, context: Any, artifact: Any) -> tuple[float, bool]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((context, artifact, future))
        if len(self._pending) == 1:
            self._flushing = loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        await asyncio.sleep(self.wait_s)
        batch, self._pending = self._pending, []
        contexts, artifacts = [b[0] for b in batch], [b[1] for b in batch]
        try:
            async with self._lock:
                output = await asyncio.get_running_loop().run_in_executor(
                    None, self.world_model.predict, contexts, artifacts
                )
            prediction = as_prediction(output, n=len(batch), score_range=self.score_range)
            self.calls += 1
        except Exception as error:  # every waiting sample sees the world model's error
            for *_, future in batch:
                future.set_exception(error)
            return
        for i, (*_, future) in enumerate(batch):
            future.set_result((float(prediction.scores[i]), bool(prediction.valid[i])))


class WMRLRewardManager(_base.RewardManagerBase):
    """A verl reward manager: world model for every sample, real execution for anchor groups.

    Class attributes (set them in a subclass):
        anchor_fraction: each group's chance to be executed for real.
        seed: fixes the anchor draw (must be the same in every worker).
        score_range: world-model scores outside it are invalid (never passed on).
        batch_wait_s: how long a worker waits to gather concurrent samples into one
            ``predict``.

    Methods to implement: :meth:`build_world_model`, :meth:`build_executor`, :meth:`to_job`;
    optionally :meth:`to_context` and :meth:`to_artifact`.
    """

    anchor_fraction: float = 0.1
    seed: int = 0
    score_range: tuple[float, float] | None = None
    batch_wait_s: float = 0.005

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, **_: Any) -> None:
        super().__init__(config, tokenizer, compute_score)
        if not 0.0 <= self.anchor_fraction <= 1.0:
            raise ValueError(f"anchor_fraction must be in [0, 1], got {self.anchor_fraction}")
        self.world_model = self.build_world_model()
        self.executor = self.build_executor()
        self.ledger = default_ledger()
        self._batcher = _PredictionBatcher(self.world_model, self.score_range, self.batch_wait_s)

    # ------------------------------------------------------------------ to implement
    def build_world_model(self) -> WorldModel:
        raise NotImplementedError("WMRLRewardManager subclasses build their world model")

    def build_executor(self) -> Executor:
        raise NotImplementedError("WMRLRewardManager subclasses build their executor")

    def to_job(self, prompt: str, response: str, row: dict[str, Any]) -> Any:
        """The executor's job for one sample; ``row`` is the sample's non-tensor fields
        (``data_source``, ``reward_model``, ``extra_info``, ``uid``, ...)."""
        raise NotImplementedError("WMRLRewardManager subclasses turn a sample into a job")

    def to_context(self, prompt: str, row: dict[str, Any]) -> Any:
        return prompt

    def to_artifact(self, response: str, row: dict[str, Any]) -> Any:
        return response

    # ------------------------------------------------------------------ verl's entry point
    async def run_single(self, data: Any) -> dict[str, Any]:
        item = data[-1:][0]  # multi-sequence outputs: the reward belongs to the last one
        row = dict(item.non_tensor_batch)
        if "uid" not in row:
            raise KeyError(
                "WMRLRewardManager needs each sample's group id in non_tensor_batch['uid'] "
                "(verl's PPO trainers set it); got fields " + ", ".join(sorted(row))
            )
        uid = str(row["uid"])
        prompt, response = self._decode(item, row)
        anchor = anchor_draw(uid, self.seed) < self.anchor_fraction
        pending = None
        if anchor:  # start the real run first: it and the world model proceed together
            job = self.to_job(prompt, response, row)
            if dataclasses.is_dataclass(job) and hasattr(job, "tags"):
                job = dataclasses.replace(job, tags={"uid": uid, **job.tags})
            pending = asyncio.wrap_future(self.executor.submit([job])[0])
        wm_score, wm_valid = await self._batcher.predict(
            self.to_context(prompt, row), self.to_artifact(response, row)
        )
        result: ExecResult | None = await pending if pending is not None else None
        record = self._record(uid, anchor, wm_score, wm_valid, result)
        await self.ledger.aput([record])
        return {
            "reward_score": record.reward,
            "reward_extra_info": {
                "wmrl_wm_score": wm_score if wm_valid else math.nan,
                "wmrl_real_score": record.real_score,
                "wmrl_is_anchor": anchor,
                "wmrl_failed": record.failed,
            },
        }

    def _decode(self, item: Any, row: dict[str, Any]) -> tuple[str, str]:
        responses = item.batch["responses"]
        length = int(item.batch["attention_mask"][-responses.shape[-1] :].sum())
        response = self.tokenizer.decode(responses[:length], skip_special_tokens=True)
        if "raw_prompt" in row:
            return _text(row["raw_prompt"]), response
        prompts = item.batch["prompts"]
        mask = item.batch["attention_mask"][: prompts.shape[-1]].bool()
        return self.tokenizer.decode(prompts[mask], skip_special_tokens=True), response

    def _record(
        self, uid: str, anchor: bool, wm_score: float, wm_valid: bool, result: ExecResult | None
    ) -> SampleRecord:
        real, failed = math.nan, False
        if result is not None:
            if result.ok and math.isfinite(result.score):
                real = result.score
            else:
                failed = True
        reward = real if anchor else (wm_score if wm_valid else math.nan)
        return SampleRecord(
            uid=uid,
            reward=float(reward),
            wm_score=float(wm_score) if wm_valid else math.nan,
            wm_valid=wm_valid,
            real_score=float(real),
            failed=failed,
            is_anchor=anchor,
            inclusion_probability=float(self.anchor_fraction),
        )
