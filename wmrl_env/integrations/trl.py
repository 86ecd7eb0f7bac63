"""TRL integration: a GRPO reward function that answers most completions with a world model.

:class:`WorldModelReward` is a plain TRL reward function (``reward_funcs=[reward]``). On each
call it

1. scores every completion with a world model (one batched ``predict``),
2. groups the completions by prompt (a GRPO group),
3. picks anchor groups with :meth:`RewardFusion.select_anchors` (uniformly, or with
   ``anchor_priority="uncertainty"`` by the world model's predictive std), forces every group
   holding an invalid world-model prediction (NaN, out of range, unparseable: never passed
   on) with :meth:`RewardFusion.force_anchors`, and
   executes the anchors for real through an :class:`~wmrl_env.executors.base.Executor`
   (``to_job(prompt, completion, **columns) -> Job``),
4. fuses both streams with :class:`~wmrl_env.fusion.RewardFusion` and returns one value per
   completion: the **fused advantage** (``None`` for a failed execution).

Why advantages and not rewards: TRL centres the returned values per group and, with
``scale_rewards="group"`` (its default), divides by each group's std, which undoes the
fusion's inverse-variance weights (a constant per group). Fused advantages are already
group-centred, so with ``scale_rewards="none"`` TRL's own arithmetic leaves them unchanged and
the policy gradient sees exactly ``FusionOutput.advantages``. :class:`WMRLGRPOTrainer` is a
``GRPOTrainer`` that checks that configuration (and a single process, since a GRPO group must
not be split across processes for the fusion to see it whole). The fused rewards, kappa,
calibration quality and anchor counts are logged through TRL's ``log_metric`` as ``wmrl/*``.

Every finished execution matters: wrap the executor in ``wmrl_env.store.LoggingExecutor`` to
commit each result to the execution log as it finishes; jobs carry the tags ``step`` and
``wm_score`` for it.

Example (needs the ``trl`` extra)::

    reward = WorldModelReward(world_model, LocalSandbox(), to_job=make_job,
                              fusion=RewardFusion(method="wmrl", anchor_fraction=0.1, seed=0))
    config = GRPOConfig(output_dir="runs/grpo", scale_rewards="none", num_generations=8)
    trainer = WMRLGRPOTrainer(model=model, reward=reward, args=config, train_dataset=dataset)
    trainer.train()
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecResult, Executor
from wmrl_env.fusion import FusionOutput, RewardFusion, uncertainty_priorities
from wmrl_env.fusion.reward_fusion import CALIBRATED_METHODS
from wmrl_env.utils.imports import require
from wmrl_env.world_models.base import (
    Prediction,
    WorldModel,
    as_prediction,
    learn_from_real_scores,
)

_trl = require("trl", "the TRL integration")
_transformers = require("transformers", "the TRL integration")
_trainer_utils = require("transformers.trainer_utils", "the TRL integration")

__all__ = [
    "RewardCall",
    "WMRLGRPOTrainer",
    "WMRLStateCallback",
    "WorldModelReward",
    "check_grpo_config",
]

_TRAINER_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments")


def _text(item: Any) -> str:
    """A prompt or completion as text: plain strings, or the contents of chat messages."""
    if isinstance(item, str):
        return item
    if isinstance(item, Sequence) and all(isinstance(m, Mapping) for m in item):
        return "\n".join(str(message.get("content", "")) for message in item)
    return str(item)


def _prompt_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


@dataclass(frozen=True)
class RewardCall:
    """What one call of :class:`WorldModelReward` saw and did (kept as ``last_call``)."""

    group_ids: np.ndarray
    prediction: Prediction
    is_anchor: np.ndarray
    real_scores: np.ndarray
    failed: np.ndarray
    results: list[ExecResult]
    fusion: FusionOutput
    returned: list[float | None]


class WorldModelReward:
    """A TRL reward function fusing world-model scores with real executions of anchor groups.

    Args:
        world_model: any :class:`~wmrl_env.world_models.base.WorldModel`.
        executor: runs the anchor jobs for real.
        to_job: ``(prompt, completion, **columns) -> Job`` for one completion; ``columns`` are
            the dataset's other columns for that row (e.g. a task id or tests).
        fusion: the :class:`RewardFusion`; default ``RewardFusion(method="wmrl", seed=0)``.
        to_context: ``(prompt, **columns) -> context`` for the world model; default the
            prompt's text.
        to_artifact: ``completion -> artifact``; default the completion's text.
        num_generations: GRPO's group size; when given, groups are consecutive blocks of this
            size (checked to share a prompt), else completions are grouped by prompt.
            :class:`WMRLGRPOTrainer` sets it from its config.
        score_range: world-model scores outside it are flagged invalid.
        update_world_model: after each call, feed the anchors' real scores to the world
            model's ``update()`` (if it has one).
        anchor_priority: ``"uniform"`` or ``"uncertainty"`` (anchor groups drawn with
            priorities from the world model's std, :func:`~wmrl_env.fusion.uncertainty_priorities`).
    """

    __name__ = "wmrl"  # TRL names a reward function's metrics after it

    def __init__(
        self,
        world_model: WorldModel,
        executor: Executor,
        to_job: Callable[..., Any],
        *,
        fusion: RewardFusion | None = None,
        to_context: Callable[..., Any] | None = None,
        to_artifact: Callable[[Any], Any] | None = None,
        num_generations: int | None = None,
        score_range: tuple[float, float] | None = None,
        update_world_model: bool = False,
        anchor_priority: str = "uniform",
    ) -> None:
        if anchor_priority not in ("uniform", "uncertainty"):
            raise ValueError(
                f"anchor_priority must be 'uniform' or 'uncertainty', got {anchor_priority!r}"
            )
        if num_generations is not None and num_generations < 1:
            raise ValueError(f"num_generations must be >= 1, got {num_generations}")
        self.world_model = world_model
        self.executor = executor
        self.to_job = to_job
        self.fusion = fusion if fusion is not None else RewardFusion(method="wmrl", seed=0)
        self.to_context = to_context or (lambda prompt, **_: _text(prompt))
        self.to_artifact = to_artifact or _text
        self.num_generations = num_generations
        self.score_range = score_range
        self.update_world_model = update_world_model
        self.anchor_priority = anchor_priority
        self.n_calls = 0
        self.n_scored = 0
        self.n_executed = 0
        self.evaluating = False
        self.last_call: RewardCall | None = None

    @contextlib.contextmanager
    def evaluation(self) -> Iterator[None]:
        """Evaluation mode: every completion gets its calibrated world-model score (``None``
        where the prediction is invalid); nothing is executed and the fusion's state (its
        calibration, kappa, anchor draw) and the counters stay as they were."""
        previous, self.evaluating = self.evaluating, True
        try:
            yield
        finally:
            self.evaluating = previous

    def _evaluate(
        self, prediction: Prediction, log_metric: Callable[[str, float], None] | None
    ) -> list[float | None]:
        scores = prediction.scores[prediction.valid]
        if self.fusion.method in CALIBRATED_METHODS and scores.size:
            scores = self.fusion.calibrator.transform(scores)
        values = np.full(prediction.valid.shape, np.nan)
        values[prediction.valid] = scores
        if log_metric is not None:
            log_metric("wmrl/eval_wm_valid_fraction", float(prediction.valid.mean()))
        return [float(v) if ok else None for v, ok in zip(values, prediction.valid, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        """The fusion's state and the call counters (the world model saves itself)."""
        return {
            "fusion": self.fusion.state_dict(),
            "counters": [self.n_calls, self.n_scored, self.n_executed],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.fusion.load_state_dict(state["fusion"])
        self.n_calls, self.n_scored, self.n_executed = (int(v) for v in state["counters"])

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"got {len(prompts)} prompts for {n} completions")
        log_metric = kwargs.get("log_metric")
        log_extra = kwargs.get("log_extra")
        state = kwargs.get("trainer_state")
        step = int(getattr(state, "global_step", self.n_calls))
        columns = {k: v for k, v in kwargs.items() if k not in (*_TRAINER_KWARGS, "completion_ids")}
        rows = [{k: v[i] for k, v in columns.items()} for i in range(n)]
        group_ids = self._group_ids(prompts)

        contexts = [self.to_context(p, **row) for p, row in zip(prompts, rows, strict=True)]
        artifacts = [self.to_artifact(c) for c in completions]
        prediction = as_prediction(
            self.world_model.predict(contexts, artifacts), n=n, score_range=self.score_range
        )
        if self.evaluating:
            return self._evaluate(prediction, log_metric)
        is_anchor = self._anchors(group_ids, prediction)
        real, failed, results = self._execute(
            prompts, completions, rows, np.flatnonzero(is_anchor), prediction, step
        )
        out = self.fusion.step(
            group_ids,
            prediction.scores,
            real,
            failed=failed,
            wm_valid=prediction.valid,
        )
        returned = [None if f else float(a) for a, f in zip(out.advantages, failed, strict=True)]
        if self.update_world_model:
            learn_from_real_scores(self.world_model, contexts, artifacts, real)
        self.n_calls += 1
        self.n_scored += n
        self.n_executed += len(results)
        self.last_call = RewardCall(
            group_ids, prediction, is_anchor, real, failed, results, out, returned
        )
        self._log(out, prediction, real, log_metric, log_extra)
        return returned

    def _group_ids(self, prompts: Sequence[Any]) -> np.ndarray:
        keys = [_prompt_key(p) for p in prompts]
        if self.num_generations is None:
            first: dict[str, int] = {}
            return np.array([first.setdefault(k, len(first)) for k in keys])
        g = self.num_generations
        if len(keys) % g:
            raise ValueError(f"{len(keys)} completions do not split into groups of {g}")
        for start in range(0, len(keys), g):
            if len(set(keys[start : start + g])) != 1:
                raise ValueError(
                    f"completions {start}..{start + g - 1} do not share one prompt: expected "
                    f"consecutive groups of num_generations={g}"
                )
        return np.arange(len(keys)) // g

    def _anchors(self, group_ids: np.ndarray, prediction: Prediction) -> np.ndarray:
        """Drawn anchor groups plus every group with an invalid prediction (forced, pi = 1);
        the fusion records the inclusion probabilities."""
        priorities = None
        if self.anchor_priority == "uncertainty":
            if prediction.std is None:
                raise ValueError("anchor_priority='uncertainty' needs a world model with a std")
            priorities = uncertainty_priorities(group_ids, prediction.std)
        self.fusion.select_anchors(group_ids, priorities)
        return self.fusion.force_anchors(~prediction.valid)

    def _execute(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        rows: list[dict[str, Any]],
        anchors: np.ndarray,
        prediction: Prediction,
        step: int,
    ) -> tuple[np.ndarray, np.ndarray, list[ExecResult]]:
        n = len(completions)
        jobs = []
        for i in anchors:
            job = self.to_job(prompts[i], completions[i], **rows[i])
            if dataclasses.is_dataclass(job) and hasattr(job, "tags"):
                wm_score = float(prediction.scores[i]) if prediction.valid[i] else math.nan
                tags = {"step": step, "wm_score": wm_score, **job.tags}
                job = dataclasses.replace(job, tags=tags)
            jobs.append(job)
        results = self.executor.run(jobs) if jobs else []
        real = np.full(n, np.nan)
        failed = np.zeros(n, dtype=bool)
        for i, result in zip(anchors, results, strict=True):
            if result.ok and math.isfinite(result.score):
                real[i] = result.score
            else:
                failed[i] = True
        return real, failed, results

    @staticmethod
    def _log(
        out: FusionOutput,
        prediction: Prediction,
        real: np.ndarray,
        log_metric: Callable[[str, float], None] | None,
        log_extra: Callable[[str, list], None] | None,
    ) -> None:
        if log_metric is not None:
            for name, value in out.metrics.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    log_metric(f"wmrl/{name}", float(value))
            log_metric("wmrl/wm_valid_fraction", float(prediction.valid.mean()))
        if log_extra is not None:
            log_extra("wm_score", prediction.scores.tolist())
            log_extra("wm_valid", prediction.valid.tolist())
            log_extra("real_score", real.tolist())
            log_extra("fused_reward", out.rewards.tolist())
            log_extra("is_anchor", out.is_anchor.tolist())


def check_grpo_config(config: Any, num_reward_funcs: int = 1) -> None:
    """Raise ``ValueError`` unless a ``GRPOConfig`` passes fused advantages through unchanged.

    That needs ``scale_rewards="none"`` (per-group or batch std scaling would rescale the
    already scaled, weighted advantages; per-group std undoes the fusion weights),
    ``multi_objective_aggregation="sum_then_normalize"`` and a weight of 1 on the fused reward
    (the first of ``num_reward_funcs``; the others may have any weight). TRL releases before
    0.22 took ``scale_rewards`` as a bool: they are refused here too.
    """
    problems = []
    if getattr(config, "scale_rewards", "none") != "none":
        problems.append(f"scale_rewards={config.scale_rewards!r} (must be 'none')")
    aggregation = getattr(config, "multi_objective_aggregation", "sum_then_normalize")
    if aggregation != "sum_then_normalize":
        problems.append(f"multi_objective_aggregation={aggregation!r}")
    weights = getattr(config, "reward_weights", None)
    if weights is not None and (len(weights) != num_reward_funcs or float(weights[0]) != 1.0):
        problems.append(
            f"reward_weights={weights!r} (need {num_reward_funcs} weights, the fused reward's 1)"
        )
    if problems:
        raise ValueError(
            "WorldModelReward returns fused advantages, which TRL leaves unchanged only with "
            "scale_rewards='none', sum_then_normalize and a unit weight on them; got "
            + ", ".join(problems)
        )


class WMRLStateCallback(_transformers.TrainerCallback):
    """Saves the reward's state with every checkpoint (``wmrl_state.pkl``: the fusion, the
    counters, and a world model that has ``state_dict()``; one that only has
    ``save(path)`` / ``load(path)`` goes to ``wmrl_world_model/``). :class:`WMRLGRPOTrainer`
    adds it and restores the state on ``train(resume_from_checkpoint=...)``."""

    FILE = "wmrl_state.pkl"
    WORLD_MODEL_DIR = "wmrl_world_model"

    def __init__(self, reward: WorldModelReward) -> None:
        self.reward = reward

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        folder = (
            Path(args.output_dir) / f"{_trainer_utils.PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        )
        folder.mkdir(parents=True, exist_ok=True)
        saved = {"reward": self.reward.state_dict(), "world_model": None}
        model = self.reward.world_model
        if hasattr(model, "state_dict") and hasattr(model, "load_state_dict"):
            saved["world_model"] = model.state_dict()
        elif self.reward.update_world_model and hasattr(model, "save"):
            model.save(folder / self.WORLD_MODEL_DIR)
        elif self.reward.update_world_model:
            raise TypeError(
                f"{type(model).__name__} learns from anchors (update_world_model=True) but has "
                "neither state_dict() nor save(): its state cannot be checkpointed"
            )
        with open(folder / self.FILE, "wb") as file:
            pickle.dump(saved, file)

    def restore(self, checkpoint: str | Path) -> None:
        """Load what :meth:`on_save` wrote into ``checkpoint``."""
        folder = Path(checkpoint)
        path = folder / self.FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the checkpoint has no wmrl state")
        with open(path, "rb") as file:
            saved = pickle.load(file)
        self.reward.load_state_dict(saved["reward"])
        model = self.reward.world_model
        if saved["world_model"] is not None:
            model.load_state_dict(saved["world_model"])
        elif (folder / self.WORLD_MODEL_DIR).exists():
            self.reward.world_model = type(model).load(folder / self.WORLD_MODEL_DIR)


class WMRLGRPOTrainer(_trl.GRPOTrainer):
    """A ``GRPOTrainer`` trained on the fused advantages of one :class:`WorldModelReward`.

    Args:
        model, args: as for ``GRPOTrainer``; ``args`` is checked with
            :func:`check_grpo_config`.
        reward: the fused reward (always the first reward function, weight 1).
        extra_reward_funcs: more TRL reward functions (e.g. a format reward), summed with the
            fused advantages by TRL: each completion's advantage is the fused advantage plus
            ``weight * (r - group mean of r)`` for every extra reward ``r`` (the fused
            advantages are already group-centred, so TRL's centring leaves them unchanged).

    Also: sets the reward's ``num_generations``; refuses multi-process runs (a GRPO group
    split across processes would be fused in pieces); evaluates in
    :meth:`WorldModelReward.evaluation` mode (no execution, fusion state untouched); saves the
    reward's state with every checkpoint (:class:`WMRLStateCallback`) and restores it on
    ``train(resume_from_checkpoint=...)``.
    """

    def __init__(
        self,
        model: Any,
        reward: WorldModelReward,
        args: Any,
        extra_reward_funcs: Sequence[Any] = (),
        **kwargs: Any,
    ) -> None:
        if "reward_funcs" in kwargs:
            raise TypeError(
                "pass the WorldModelReward as `reward` and other reward functions as "
                "`extra_reward_funcs`, not `reward_funcs`"
            )
        check_grpo_config(args, 1 + len(extra_reward_funcs))
        reward.num_generations = args.num_generations
        self.wmrl_reward = reward
        self.wmrl_state = WMRLStateCallback(reward)
        callbacks = [*(kwargs.pop("callbacks", None) or []), self.wmrl_state]
        super().__init__(
            model=model,
            reward_funcs=[reward, *extra_reward_funcs],
            args=args,
            callbacks=callbacks,
            **kwargs,
        )
        if self.accelerator.num_processes > 1:
            raise ValueError(
                f"WMRLGRPOTrainer runs in one process, got {self.accelerator.num_processes}: "
                "each process would fuse only its share of every GRPO group"
            )

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any) -> Any:
        if resume_from_checkpoint:
            checkpoint = resume_from_checkpoint
            if checkpoint is True:
                checkpoint = _trainer_utils.get_last_checkpoint(self.args.output_dir)
                if checkpoint is None:
                    raise ValueError(f"no checkpoint found in {self.args.output_dir}")
            self.wmrl_state.restore(checkpoint)
            resume_from_checkpoint = checkpoint
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        with self.wmrl_reward.evaluation():
            return super().evaluate(*args, **kwargs)
