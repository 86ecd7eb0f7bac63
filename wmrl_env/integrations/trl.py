"""TRL integration: a GRPO reward function that answers most completions with a world model.

:class:`WorldModelReward` is a plain TRL reward function (``reward_funcs=[reward]``). On each
call it

1. scores every completion with a world model (one batched ``predict``),
2. groups the completions by prompt (a GRPO group),
3. plans the round with the anchored-round engine (:class:`~wmrl_env.rounds.AnchoredRound`):
   anchor groups drawn uniformly, or with ``anchor_priority="uncertainty"`` / ``"ucb"`` from
   the world model's std or upper bound; optionally only ``execute_per_group`` members of
   each anchor group (screening); every group holding an invalid world-model prediction
   (NaN, out of range, unparseable: never passed on) forced (``pi = 1``), and
   executes the plan for real through an :class:`~wmrl_env.executors.base.Executor`
   (``to_job(prompt, completion, **columns) -> Job``),
4. fuses both streams with :class:`~wmrl_env.fusion.RewardFusion` and returns one value per
   completion: the **fused advantage**.

A program that fails (crash, timeout, out of memory, invalid output) is scored
``failure_score`` (default: the score range's minimum, else 0): it is the policy's fault and
its advantage falls below its group's mean. A program known to fail without running it
(``known_failure``, e.g. :func:`~wmrl_env.sandboxes.does_not_parse`) scores
``failure_score`` without execution, and its group stays a world-model group (a *known
outcome*, ``RewardFusion.step(known_scores=...)``; before, its invalid prediction forced the
whole group to execute, about 40 % of groups in the code-policy example). Without
``known_failure`` such a program's invalid prediction still forces its group.
Only an infrastructure failure (``ExecStatus.ERROR``: the executor broke) is missing data:
``None`` to TRL, advantage 0, out of the group's baseline.

Evaluation is honest: :meth:`WMRLGRPOTrainer.evaluate` executes a random sample of the
evaluation completions (``eval_real_samples``, default 385: a 95 % interval of +-0.05 on a
score in [0, 1]); TRL's ``eval_rewards/wmrl/mean`` is then the mean real score of that sample,
the trainer adds ``wmrl/eval_real_*`` (mean, n, ci95, exec_seconds), the calibrated world
model's figures as ``wmrl/eval_wm_*`` and ``wmrl/eval_hacking_alarm`` (the world model
overstates the real score on the executed sample beyond its 95 % interval). Evaluation
executions are counted apart (``n_eval_executed``) and never touch the fusion's state.

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
import logging
import math
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecResult, Executor
from wmrl_env.fusion import FusionOutput, RewardFusion
from wmrl_env.fusion.reward_fusion import CALIBRATED_METHODS
from wmrl_env.integrations._shared import (
    UPDATE_WORLD_MODEL,
    EvalTally,
    as_text,
    eval_sample_size,
    failure_score_for,
    flatten_metrics,
    real_outcome,
)
from wmrl_env.rounds import (
    DEFAULT_MAX_INFRASTRUCTURE_FAILURES,
    AnchoredRound,
    AnchorSelection,
    known_outcomes,
    task_cluster,
)
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


def _prompt_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


@dataclass(frozen=True)
class RewardCall:
    """What one call of :class:`WorldModelReward` saw and did (kept as ``last_call``)."""

    group_ids: np.ndarray
    prediction: Prediction
    is_anchor: np.ndarray
    real_scores: np.ndarray
    failed: np.ndarray  # missing: the infrastructure failed (program failures are scored)
    results: list[ExecResult]
    fusion: FusionOutput
    returned: list[float | None]
    known_failure: np.ndarray  # scored failure_score without execution
    metrics: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # as logged


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
        failure_score: the real score of a program that failed (crash, timeout, out of
            memory, invalid output); default the minimum of ``score_range``, else 0.
        update_world_model: after each call, feed the anchors' real scores to the world
            model's ``update()`` (if it has one); on by default, as in every integration.
        anchor_priority: ``"uniform"``, ``"uncertainty"`` (anchor groups drawn with
            priorities from the world model's std, :func:`~wmrl_env.fusion.uncertainty_priorities`)
            or ``"ucb"`` (by each group's upper bound ``s + ucb_kappa * std`` above the
            batch's lowest, :func:`~wmrl_env.fusion.ucb_priorities`).
        ucb_kappa: the std's multiple in the upper bound (``"ucb"`` and screening).
        execute_per_group: screening: execute only this many members of each anchor group,
            drawn by their upper bound (:func:`~wmrl_env.fusion.screen_members`); ``None``
            (default): whole groups.
        screening: ``"pps"`` (default: each member's probability of execution known, PPI
            stays unbiased) or ``"top"`` (the highest upper bounds; refused with ``ppi``).
        screening_seed: seeds the screening draw.
        known_failure: ``artifact -> bool``, True for a program that certainly fails without
            running it (e.g. :func:`~wmrl_env.sandboxes.does_not_parse`): it is scored
            ``failure_score`` without execution (also inside an anchor group) and is no
            evidence for the fusion; its group is not forced to execute.
        max_infrastructure_failures: real executions failing in the infrastructure in a row
            (the executor broke: a dead sandbox daemon, lost workers) before a call raises
            :class:`~wmrl_env.rounds.InfrastructureFailureError` instead of training on the
            world model alone (0: never).

    Each group's task for the fusion's gate (``clusters``) is its prompt: a prompt that
    recurs across steps is one cluster of evidence, not one per step.
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
        failure_score: float | None = None,
        update_world_model: bool = UPDATE_WORLD_MODEL,
        anchor_priority: str = "uniform",
        ucb_kappa: float = 1.0,
        execute_per_group: int | None = None,
        screening: str = "pps",
        screening_seed: int | None = None,
        known_failure: Callable[[Any], bool] | None = None,
        max_infrastructure_failures: int = DEFAULT_MAX_INFRASTRUCTURE_FAILURES,
    ) -> None:
        if num_generations is not None and num_generations < 1:
            raise ValueError(f"num_generations must be >= 1, got {num_generations}")
        self.world_model = world_model
        self.executor = executor
        self.to_job = to_job
        selection = AnchorSelection(
            priority=anchor_priority,
            ucb_kappa=ucb_kappa,
            execute_per_group=execute_per_group,
            screening=screening,
            rng=np.random.default_rng(screening_seed),
        )
        self.engine = AnchoredRound(
            fusion if fusion is not None else RewardFusion(method="wmrl", seed=0),
            failure_score=failure_score_for(failure_score, score_range),
            selection=selection,
            max_infrastructure_failures=max_infrastructure_failures,
        )
        self.fusion = self.engine.fusion
        self.to_context = to_context or (lambda prompt, **_: as_text(prompt))
        self.to_artifact = to_artifact or as_text
        self.num_generations = num_generations
        self.score_range = score_range
        self.failure_score = self.engine.failure_score
        self.update_world_model = update_world_model
        self.anchor_priority = anchor_priority
        self.known_failure = known_failure
        self.health = self.engine.health
        self.n_calls = 0
        self.n_scored = 0
        self.n_executed = 0
        self.n_eval_executed = 0
        self.last_call: RewardCall | None = None
        self._eval: tuple[EvalTally, float, np.random.Generator] | None = None

    @property
    def evaluating(self) -> bool:
        return self._eval is not None

    @contextlib.contextmanager
    def evaluation(
        self, fraction: float = 1.0, seed: int | Sequence[int] = 0
    ) -> Iterator[EvalTally]:
        """Evaluation mode: each completion is executed with probability ``fraction`` (its own
        draw from ``seed``) and returns its real score (``None`` when not executed or the
        infrastructure failed); the yielded :class:`EvalTally` gathers the real and the
        calibrated world-model figures. The fusion's state (calibration, kappa, anchor draw)
        and the training counters stay as they were."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {fraction}")
        if self._eval is not None:
            raise RuntimeError("already evaluating")
        tally = EvalTally()
        self._eval = (tally, fraction, np.random.default_rng(seed))
        try:
            yield tally
        finally:
            self._eval = None

    def _evaluate(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        rows: list[dict[str, Any]],
        prediction: Prediction,
        step: int,
    ) -> list[float | None]:
        tally, fraction, rng = self._eval
        wm = np.full(len(completions), np.nan)
        scores = prediction.scores[prediction.valid]
        if self.fusion.method in CALIBRATED_METHODS and scores.size:
            scores = self.fusion.calibrator.transform(scores)
        wm[prediction.valid] = scores
        executed = rng.random(len(completions)) < fraction
        real, missing, results = self._execute(
            prompts, completions, rows, np.flatnonzero(executed), prediction, step
        )
        tally.add(wm, real, executed, sum(r.exec_seconds for r in results))
        self.n_eval_executed += len(results)
        known = executed & ~missing
        return [float(r) if k else None for r, k in zip(real, known, strict=True)]

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

        contexts = [self.to_context(p, **row) for p, row in zip(prompts, rows, strict=True)]
        artifacts = [self.to_artifact(c) for c in completions]
        prediction = as_prediction(
            self.world_model.predict(contexts, artifacts), n=n, score_range=self.score_range
        )
        if self.evaluating:
            return self._evaluate(prompts, completions, rows, prediction, step)
        group_ids = self._group_ids(prompts)
        known, known_status = known_outcomes(self.known_failure, artifacts)
        plan = self.engine.plan(group_ids, prediction, known, known_status)
        record = self.engine.record(n)
        executed = np.flatnonzero(plan.execute)
        record.add_all(executed, self._run(prompts, completions, rows, executed, prediction, step))
        clusters = [task_cluster(_prompt_key(p)) for p in prompts]
        finished = self.engine.finish(plan, record, prediction, clusters)
        out, real, failed = finished.fusion, record.score, record.failed
        returned = [None if f else float(a) for a, f in zip(out.advantages, failed, strict=True)]
        if self.update_world_model:
            learn_from_real_scores(self.world_model, contexts, artifacts, real)
        self.n_calls += 1
        self.n_scored += n
        self.n_executed += len(record.results)
        self.last_call = RewardCall(
            group_ids,
            prediction,
            plan.anchors,
            real,
            failed,
            record.results,
            out,
            returned,
            known,
            finished.metrics,
        )
        self._log(finished.metrics, out, prediction, real, log_metric, log_extra)
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

    def _execute(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        rows: list[dict[str, Any]],
        anchors: np.ndarray,
        prediction: Prediction,
        step: int,
    ) -> tuple[np.ndarray, np.ndarray, list[ExecResult]]:
        results = self._run(prompts, completions, rows, anchors, prediction, step)
        self.health.record(results)
        real = np.full(len(completions), np.nan)
        missing = np.zeros(len(completions), dtype=bool)
        for i, result in zip(anchors, results, strict=True):
            real[i], missing[i] = real_outcome(result, self.failure_score)
        return real, missing, results

    def _run(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        rows: list[dict[str, Any]],
        indices: np.ndarray,
        prediction: Prediction,
        step: int,
    ) -> list[ExecResult]:
        """Run the completions at ``indices`` for real; their jobs carry the tags ``step``
        and ``wm_score``."""
        jobs = []
        for i in indices:
            job = self.to_job(prompts[i], completions[i], **rows[i])
            if dataclasses.is_dataclass(job) and hasattr(job, "tags"):
                wm_score = float(prediction.scores[i]) if prediction.valid[i] else math.nan
                tags = {"step": step, "wm_score": wm_score, **job.tags}
                job = dataclasses.replace(job, tags=tags)
            jobs.append(job)
        return self.executor.run(jobs) if jobs else []

    @staticmethod
    def _log(
        metrics: Mapping[str, Any],
        out: FusionOutput,
        prediction: Prediction,
        real: np.ndarray,
        log_metric: Callable[[str, float], None] | None,
        log_extra: Callable[[str, list], None] | None,
    ) -> None:
        if log_metric is not None:
            for name, value in flatten_metrics(metrics).items():
                log_metric(name, value)
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
        eval_real_samples: how many evaluation completions to execute for real (drawn at
            random, each with the same chance); default 385, a 95 % interval of +-0.05 on a
            score in [0, 1]. 0 executes none (then only ``wmrl/eval_wm_*`` are measured).

    Also: sets the reward's ``num_generations``; refuses multi-process runs (a GRPO group
    split across processes would be fused in pieces); evaluates in
    :meth:`WorldModelReward.evaluation` mode (a real sample, fusion state untouched); saves the
    reward's state with every checkpoint (:class:`WMRLStateCallback`) and restores it on
    ``train(resume_from_checkpoint=...)``.
    """

    def __init__(
        self,
        model: Any,
        reward: WorldModelReward,
        args: Any,
        extra_reward_funcs: Sequence[Any] = (),
        eval_real_samples: int = eval_sample_size(),
        **kwargs: Any,
    ) -> None:
        if eval_real_samples < 0:
            raise ValueError(f"eval_real_samples must be >= 0, got {eval_real_samples}")
        if "reward_funcs" in kwargs:
            raise TypeError(
                "pass the WorldModelReward as `reward` and other reward functions as "
                "`extra_reward_funcs`, not `reward_funcs`"
            )
        check_grpo_config(args, 1 + len(extra_reward_funcs))
        reward.num_generations = args.num_generations
        self.wmrl_reward = reward
        self.eval_real_samples = eval_real_samples
        self._n_evaluations = 0
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

    def evaluate(self, eval_dataset: Any = None, *args: Any, **kwargs: Any) -> dict[str, float]:
        """TRL's evaluation, with a random sample of about ``eval_real_samples`` completions
        executed for real: TRL's ``eval_rewards/wmrl/*`` are real scores of that sample, and
        ``wmrl/eval_real_*``, ``wmrl/eval_wm_*`` and ``wmrl/eval_hacking_alarm`` are added."""
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        generations = getattr(self.args, "num_generations_eval", None) or self.num_generations
        try:
            total = len(dataset) * generations
        except TypeError:  # no length (an iterable dataset): execute every completion
            total = 0
        fraction = min(1.0, self.eval_real_samples / total) if total else 1.0
        self._n_evaluations += 1
        quiet = _DropMessage("All reward functions returned None")
        _trl_logger().addFilter(quiet)
        try:
            seed = (int(self.args.seed), self._n_evaluations)
            with self.wmrl_reward.evaluation(fraction, seed=seed) as tally:
                metrics = super().evaluate(eval_dataset, *args, **kwargs)
        finally:
            _trl_logger().removeFilter(quiet)
        honest = tally.metrics()
        self.log(honest)
        return {**metrics, **honest}


class _DropMessage(logging.Filter):
    """Drops TRL's warning for evaluation rows that were not executed (``None`` on purpose)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def _trl_logger() -> logging.Logger:
    return logging.getLogger(_trl.trainer.grpo_trainer.__name__)
