"""``WMRLRewardManager``: verl's reward manager for world-model rewards with real anchors.

verl calls :meth:`WMRLRewardManager.run_single` once per sample, in several reward-loop
workers at once. Per sample it

1. asks the world model (concurrent samples of a worker are batched into one ``predict``),
2. if the sample's group is an anchor (:func:`~wmrl_env.integrations.verl.ledger.anchor_draw`
   of its ``uid``: the same answer in every worker, so groups are anchored whole), starts the
   real execution *before* waiting for the world model, so both run at the same time,
3. files a :class:`~wmrl_env.integrations.verl.ledger.SampleRecord` for the advantage step,
   under the sample's key (``reward_extra_info["wmrl_key"]``: ``{uid}_{session_id}``),
4. returns ``reward_score``: the real score on executed anchors, the world-model score
   elsewhere, NaN for a missing execution or an invalid prediction (what verl logs as
   ``critic/score``).

Failures: a program that fails (crash, timeout, out of memory, invalid output) scores
``failure_score`` (default the minimum of ``score_range``, else 0), like any outcome; only an
infrastructure failure (the executor broke) is missing. A program known to fail without
running it (:meth:`WMRLRewardManager.is_known_failure`, e.g.
:func:`~wmrl_env.sandboxes.does_not_parse`) is never executed, in an anchor group or not: it
scores ``failure_score`` as a *known outcome*. A sample outside the anchors whose world-model
prediction is invalid is executed alone, and its program outcome is a known outcome too. A
known outcome is that sample's reward but no evidence for the fusion (not drawn at random:
no calibration pair, no part of kappa, the gate or PPI's rectification), and its group stays
a world-model group. A sample of an anchor group whose prediction is invalid is executed
whether its group was drawn or not, so it is filed with inclusion probability 1 (PPI gives
it its real score; :func:`~wmrl_env.rounds.sample_outcome` has each case).

``max_infrastructure_failures`` infrastructure failures in a row in one worker raise
:class:`~wmrl_env.rounds.InfrastructureFailureError`, which stops the run instead of
leaving it to train on the world model alone. Each record carries the world model's std
and the sample's task (:meth:`WMRLRewardManager.to_cluster`) for the fusion's gate.

Validation (``meta_info["validate"]``, set by verl's legacy trainer, or
:meth:`WMRLRewardManager.is_validation`): each sample is executed for real with probability
``eval_real_fraction`` (default 1), its ``reward_score`` is the real outcome (the world-model
score where not executed), nothing is filed for the advantage step, and the figures reach
the estimator's log as ``wmrl/eval_real_*`` / ``wmrl/eval_wm_*`` /
``wmrl/eval_hacking_alarm`` at its next batch.

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
import uuid
from typing import Any

from wmrl_env.executors.base import Executor
from wmrl_env.integrations._shared import (
    UPDATE_WORLD_MODEL,
    as_text,
    failure_score_for,
    real_outcome,
)
from wmrl_env.integrations.verl.ledger import anchor_draw, default_ledger
from wmrl_env.integrations.verl.patch import KEY_COLUMN, sample_key
from wmrl_env.integrations.verl.scoring import SampleDraw, score_sample
from wmrl_env.rounds import DEFAULT_MAX_INFRASTRUCTURE_FAILURES, InfrastructureHealth, task_cluster
from wmrl_env.utils.imports import require
from wmrl_env.world_models.base import WorldModel, as_prediction, learn_from_real_scores

_base = require("verl.experimental.reward_loop.reward_manager.base", "the verl integration")

__all__ = ["WMRLRewardManager"]


class _PredictionBatcher:
    """Collects the predictions a worker's concurrent samples ask for into one ``predict``."""

    def __init__(
        self, world_model: WorldModel, score_range: tuple[float, float] | None, wait_s: float
    ) -> None:
        self.world_model = world_model
        self.score_range = score_range
        self.wait_s = wait_s
        self._pending: list[tuple[Any, Any, asyncio.Future]] = []
        self.lock = asyncio.Lock()
        self._flushing: asyncio.Task | None = None
        self.calls = 0

    async def predict(self, context: Any, artifact: Any) -> tuple[float, bool, float]:
        """``(score, valid, std)`` of one sample (std NaN when the world model has none)."""
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
            async with self.lock:
                output = await asyncio.get_running_loop().run_in_executor(
                    None, self.world_model.predict, contexts, artifacts
                )
            prediction = as_prediction(output, n=len(batch), score_range=self.score_range)
            self.calls += 1
        except Exception as error:  # every waiting sample sees the world model's error
            for *_, future in batch:
                future.set_exception(error)
            return
        std = prediction.std
        for i, (*_, future) in enumerate(batch):
            spread = math.nan if std is None else float(std[i])
            future.set_result((float(prediction.scores[i]), bool(prediction.valid[i]), spread))


class WMRLRewardManager(_base.RewardManagerBase):
    """A verl reward manager: world model for every sample, real execution for anchor groups.

    Set the class attributes below in a subclass.

    Attributes:
        anchor_fraction: each group's chance to be executed for real.
        seed: fixes the anchor draw (must be the same in every worker).
        score_range: world-model scores outside it are invalid (never passed on).
        failure_score: the score of a program that failed; default the minimum of
            ``score_range``, else 0.
        update_world_model: feed each anchor's real outcome to the world model's
            ``update()`` (if it has one); on, as in every integration. Each reward worker
            holds its own copy of the world model and learns from its own anchors.
        eval_real_fraction: each validation sample's chance to be executed for real.
        batch_wait_s: how long a worker waits to gather concurrent samples into one
            ``predict``.
        max_infrastructure_failures: real executions of one worker failing in the
            infrastructure in a row before it raises
            :class:`~wmrl_env.rounds.InfrastructureFailureError` (0: never).

    Methods to implement: :meth:`build_world_model`, :meth:`build_executor`, :meth:`to_job`;
    optionally :meth:`to_context`, :meth:`to_artifact`, :meth:`to_cluster` and
    :meth:`is_known_failure`.
    """

    anchor_fraction: float = 0.1
    seed: int = 0
    score_range: tuple[float, float] | None = None
    failure_score: float | None = None
    update_world_model: bool = UPDATE_WORLD_MODEL
    eval_real_fraction: float = 1.0
    batch_wait_s: float = 0.005
    max_infrastructure_failures: int = DEFAULT_MAX_INFRASTRUCTURE_FAILURES

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, **_: Any) -> None:
        super().__init__(config, tokenizer, compute_score)
        for name in ("anchor_fraction", "eval_real_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        self.outcome_on_failure = failure_score_for(self.failure_score, self.score_range)
        self.world_model = self.build_world_model()
        self.executor = self.build_executor()
        self.ledger = default_ledger()
        self.health = InfrastructureHealth(self.max_infrastructure_failures)
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

    def to_cluster(self, prompt: str, row: dict[str, Any]) -> str:
        """The sample's task for the fusion's gate, the same for every sample of its group;
        default a digest of the prompt (a prompt recurring across steps is one cluster)."""
        return task_cluster(prompt)

    def is_known_failure(self, artifact: Any, row: dict[str, Any]) -> bool:
        """True for an artifact that certainly fails without running it (scored
        ``failure_score``, never executed); default never. For Python programs:
        ``return does_not_parse(artifact)`` (:func:`~wmrl_env.sandboxes.does_not_parse`)."""
        return False

    def is_validation(self, row: dict[str, Any], meta_info: dict[str, Any]) -> bool:
        """Whether a sample belongs to a validation run: verl's ``meta_info["validate"]`` (the
        legacy trainer), else verl's data convention ``extra_info["split"]`` in
        ``("test", "val", "validation")`` (verl's v1 trainer tells the reward manager
        nothing; override this when your validation rows are marked otherwise)."""
        if meta_info.get("validate"):
            return True
        extra = row.get("extra_info")
        split = extra.get("split") if isinstance(extra, dict) else None
        return split in ("test", "val", "validation")

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
        key = sample_key(uid, row["session_id"]) if "session_id" in row else uuid.uuid4().hex
        prompt, response = self._decode(item, row)
        context, artifact = self.to_context(prompt, row), self.to_artifact(response, row)
        if self.is_validation(row, dict(getattr(data, "meta_info", None) or {})):
            return await self._validate(key, prompt, response, row, context, artifact)
        sample = SampleDraw(
            uid,
            key,
            self.seed,
            self.anchor_fraction,
            self.is_known_failure(artifact, row),
            self.to_cluster(prompt, row),
        )
        record = await score_sample(
            sample,
            lambda: self._batcher.predict(context, artifact),
            lambda: self._submit(prompt, response, row, uid),
            self.health,
            self.outcome_on_failure,
        )
        await self.ledger.aput([record])
        if record.is_anchor and self.update_world_model and math.isfinite(record.real_score):
            await self._learn(context, artifact, record.real_score)
        return {
            "reward_score": record.reward,
            "reward_extra_info": {
                KEY_COLUMN: key,
                "wmrl_wm_score": record.wm_score,
                "wmrl_real_score": record.real_score,
                "wmrl_is_anchor": sample.drawn,
                "wmrl_failed": record.failed,
                "wmrl_validation": False,
            },
        }

    def _submit(self, prompt: str, response: str, row: dict[str, Any], uid: str) -> Any:
        job = self.to_job(prompt, response, row)
        if dataclasses.is_dataclass(job) and hasattr(job, "tags"):
            job = dataclasses.replace(job, tags={"uid": uid, **job.tags})
        return asyncio.wrap_future(self.executor.submit([job])[0])

    async def _learn(self, context: Any, artifact: Any, real: float) -> None:
        async with self._batcher.lock:  # never while the world model predicts
            await asyncio.get_running_loop().run_in_executor(
                None, learn_from_real_scores, self.world_model, [context], [artifact], [real]
            )

    async def _validate(
        self, key: str, prompt: str, response: str, row: dict[str, Any], context: Any, artifact: Any
    ) -> dict[str, Any]:
        executed = anchor_draw(f"eval\x00{key}", self.seed) < self.eval_real_fraction
        pending = self._submit(prompt, response, row, str(row["uid"])) if executed else None
        wm_score, wm_valid, _ = await self._batcher.predict(context, artifact)
        wm = wm_score if wm_valid else math.nan
        real, seconds = math.nan, 0.0
        if pending is not None:
            result = await pending
            self.health.record([result])
            real, _ = real_outcome(result, self.outcome_on_failure)
            seconds = result.exec_seconds
        await self.ledger.aput_eval(wm, real, executed, seconds)
        return {
            "reward_score": real if math.isfinite(real) else wm,
            "reward_extra_info": {
                KEY_COLUMN: key,
                "wmrl_wm_score": wm,
                "wmrl_real_score": real,
                "wmrl_is_anchor": False,
                "wmrl_failed": executed and math.isnan(real),
                "wmrl_validation": True,
            },
        }

    def _decode(self, item: Any, row: dict[str, Any]) -> tuple[str, str]:
        responses = item.batch["responses"]
        length = int(item.batch["attention_mask"][-responses.shape[-1] :].sum())
        response = self.tokenizer.decode(responses[:length], skip_special_tokens=True)
        if "raw_prompt" in row:
            return as_text(row["raw_prompt"]), response
        prompts = item.batch["prompts"]
        mask = item.batch["attention_mask"][: prompts.shape[-1]].bool()
        return self.tokenizer.decode(prompts[mask], skip_special_tokens=True), response
