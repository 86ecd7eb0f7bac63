"""One run of the per-task regime: an arm, a seed, a learning rate, every held-out task.

Each task has its own softmax policy over the programs, uniform at the start: tabular
(:class:`~wmrl_env.bench.tabular.TabularPolicy`, one logit per program) or factorized
(:class:`~wmrl_env.bench.factorized.FactorizedPolicy`, a logit summed over the program's
components, so an execution teaches the policy about related programs). A round samples
one group of ``group_size`` programs per task:

* ``real`` executes every group; ``anchors`` executes only the groups of the ``m`` tasks the
  anchor draw picks (``m = round(anchor_fraction * T)``) and updates only those tasks;
* ``wm`` scores every group with the world model; the fused arms (``debias``, ``denoise``,
  ``wmrl``, ``ppi``) score every group with it, execute the ``m`` drawn groups, and fuse the
  two streams with :class:`~wmrl_env.fusion.RewardFusion`, given the draw's exact inclusion
  probabilities; the anchors then teach the world model
  (:func:`~wmrl_env.world_models.base.learn_from_real_scores`).

Every arm's round is an anchored round of the engine
(:class:`~wmrl_env.rounds.AnchoredRound`): the bench's draw below and its exact inclusion
probabilities go in as the plan's draw; screening (with the same generator), forced groups
(a group holding an invalid prediction), the real record and the fusion (the tasks as the
gate's clusters, the world model's std) are the engine's, as in every integration.

Real scores replay the committed execution table, each execution charged its recorded
seconds. After every round the run records, on the bank's deploy score
(:attr:`~wmrl_env.bench.bank.TaskBank.deploy`: the private test where the suite has one,
else the reward itself), each task's greedy program (ties broken at random) and the best
program by reward executed so far on it (what one would deploy; a task never executed
deploys its greedy pick), and the world model's within-task Spearman on the round's
groups against the table (measured, never used to train).

**Anchor draws.** ``random``: a simple random sample of ``m`` groups, ``pi = m / T``.
``balanced``: systematic PPS sampling (:func:`~wmrl_env.fusion.anchors.select_anchor_groups`)
with priority 1 on the tasks executed least so far and 0 elsewhere, mixed with uniform by
``balance_mix``: every task's inclusion probability is exact and at least
``m * balance_mix / T`` given the history, which is what PPI needs to stay unbiased (its
``1 / pi`` rectification is exact for any known ``pi > 0``). A deterministic rotation would
balance perfectly but leave ``pi = 0`` on tasks already drawn, where PPI's rectifier is
missing.

``ucb``: PPS with priority each task's world-model upper bound above its best executed
score, ``max(max_i (s_i + kappa * std_i) - best_t, 0)`` over the round's group (a task never
executed is measured from the round's lowest upper bound), mixed with uniform by
``balance_mix``: ``pi_t = m * ((1 - mix) * w_t / mean(w) + mix) / T`` (capped at 1, the excess
spread), exact and ``>= m * mix / T``. ``balanced-ucb``: the same with ``w_t`` zeroed outside
the least-executed tasks (alike when none of them rises above its best): the uniform share
spread over every task, the rest over the least-executed ones by their upper bound.

**Screening** (``execute_per_group = k``): the fused arms sample ``group_size`` programs per
anchor task as before but execute only ``k``, chosen by their upper bound
(:func:`~wmrl_env.fusion.screen_members`: ``pps`` draws them with exact ``pi_{i|g}``, ``top``
takes the best); the fusion scores the others. Each program's inclusion probability
``pi_t * pi_{i|t}`` goes to the fusion, and ``round(m * group_size / k)`` tasks (at most
``T``) are anchored per round, so a round executes as many programs as without. Within-group
PPS mixes with uniform by ``balance_mix`` as well.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from wmrl_env.bench.bank import TaskBank, TaskPredictions, greedy_scores, predicts_per_task
from wmrl_env.bench.config import ANCHORS_ARM
from wmrl_env.bench.factorized import make_policy
from wmrl_env.bench.pertask_config import PerTaskConfig
from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.fusion import RewardFusion, ucb_priorities
from wmrl_env.fusion.anchors import num_anchor_groups, select_anchor_groups
from wmrl_env.rounds import AnchoredRound, AnchorSelection, FinishedRound
from wmrl_env.world_models.base import Prediction

EXECUTING_ARMS = ("real", ANCHORS_ARM)


def draw_anchor_tasks(
    executions: np.ndarray,
    num_anchors: int,
    how: str,
    rng: np.random.Generator,
    mix: float,
    upper: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(chosen, pi)`` per task: ``num_anchors`` tasks drawn at random, balanced (priority
    to the tasks with the fewest ``executions``), by ``upper`` (``"ucb"``: per task, the
    priority of :func:`~wmrl_env.fusion.ucb_priorities`) or both (``"balanced-ucb"``), with
    exact inclusion probabilities.

    >>> rng = np.random.default_rng(0)
    >>> chosen, pi = draw_anchor_tasks(np.array([0, 8, 8, 8]), 1, "balanced", rng, 0.2)
    >>> pi.round(2).tolist(), int(chosen.sum())
    ([0.85, 0.05, 0.05, 0.05], 1)
    >>> ucb = np.array([0.0, 0.1, 0.3, 0.0])
    >>> draw_anchor_tasks(np.array([0, 0, 8, 8]), 1, "ucb", rng, 0.2, ucb)[1].round(2).tolist()
    [0.05, 0.25, 0.65, 0.05]
    >>> draw_anchor_tasks(np.array([0, 0, 8, 8]), 1, "balanced-ucb", rng, 0.2, ucb)[1].round(2)
    array([0.05, 0.85, 0.05, 0.05])
    """
    num_tasks = executions.shape[0]
    if how == "random":
        return select_anchor_groups(num_tasks, num_anchors, rng)
    least = (executions == executions.min()).astype(np.float64)
    if how == "balanced":
        return select_anchor_groups(num_tasks, num_anchors, rng, least, uniform_mix=mix)
    if upper is None:
        raise ValueError(f"the {how!r} anchor draw needs the world model's upper bounds")
    priority = np.asarray(upper, dtype=np.float64)
    if how == "balanced-ucb":
        priority = priority * least
        if not priority.any():  # no least-executed task rises above its best: balance alone
            priority = least
    return select_anchor_groups(num_tasks, num_anchors, rng, priority, uniform_mix=mix)


def fused_anchor_tasks(num_anchors: int, num_tasks: int, group_size: int, keep: int) -> int:
    """Anchor tasks per round of a fused arm: ``num_anchors``, or with screening (``keep``
    members of each anchor group) ``round(num_anchors * group_size / keep)`` (at most
    ``num_tasks``), so that a round executes as many programs as without."""
    if not keep:
        return num_anchors
    return min(num_tasks, round(num_anchors * group_size / keep))


def round_engine(
    fusion: RewardFusion,
    config: PerTaskConfig,
    rng: np.random.Generator,
    keep: int,
    failure_score: float = math.nan,
    max_infrastructure_failures: int = 0,
) -> AnchoredRound:
    """The anchored-round engine of one run: screening ``keep`` members of each anchor task
    (0: none) by their upper bound with ``rng``, the generator of the bench's own draw; no
    breaker by default (the bench replays a table, which never fails)."""
    selection = AnchorSelection(
        ucb_kappa=config.ucb_kappa,
        execute_per_group=keep or None,
        screening=config.screening,
        rng=rng,
        uniform_mix=config.balance_mix,
    )
    return AnchoredRound(
        fusion,
        failure_score=failure_score,
        selection=selection,
        max_infrastructure_failures=max_infrastructure_failures,
    )


def play_round(
    engine: AnchoredRound,
    group_ids: np.ndarray,
    prediction: Prediction | None,
    chosen: np.ndarray,
    pi: np.ndarray,
    run: Callable[[np.ndarray], list[ExecResult]],
    known: np.ndarray | None = None,
) -> FinishedRound:
    """One round of the bench through the engine: the bench's draw (``chosen`` and ``pi``
    per task; the group ids are the tasks) as the plan's draw, screening and forced groups
    by the engine, ``run(indices)`` the real results of the samples the plan executes,
    ``known`` the outcomes known without execution (the bench's table has none), the tasks
    as the gate's clusters (each task recurs every round: one cluster)."""
    plan = engine.plan(
        group_ids, prediction, known, drawn=chosen[group_ids], inclusion=pi[group_ids]
    )
    record = engine.record(group_ids.size)
    todo = np.flatnonzero(plan.execute)
    record.add_all(todo, run(todo))
    return engine.finish(plan, record, prediction, clusters=group_ids)


def run_arm(
    bank: TaskBank,
    config: PerTaskConfig,
    arm: str,
    seed: int,
    learning_rate: float,
    world_model: Any | None,
    label: str | None = None,
    cache: bool = True,
) -> RunRecord:
    """Run one arm with one seed at ``learning_rate``; the record's ``task_scores`` hold the
    per-task readings of :func:`per_task_readings`. ``cache``: remember predictions per
    (task, program) until the task is taught, where that is exact
    (:func:`~wmrl_env.bench.bank.predicts_per_task`; the results are the same, faster)."""
    num_tasks, group_size = bank.num_tasks, config.group_size
    predictions = None
    if world_model is not None:
        per_task = predicts_per_task(world_model, num_tasks) if cache else False
        predictions = TaskPredictions(bank, world_model, per_task)
    policy = make_policy(
        config.policy,
        num_tasks,
        bank.num_programs,
        bank.choices,
        learning_rate,
        config.optimizer,
        seed=seed,
    )
    rng = np.random.default_rng([seed, 7])
    num_anchors = num_anchor_groups(num_tasks, config.anchor_fraction, minimum=1)
    method = "real" if arm in EXECUTING_ARMS else arm
    keep = config.execute_per_group if method not in ("real", "wm") else 0
    fused_anchors = fused_anchor_tasks(num_anchors, num_tasks, group_size, keep)
    by_upper = config.anchor_draw in ("ucb", "balanced-ucb")
    plain_draw = {"ucb": "random", "balanced-ucb": "balanced"}.get(config.anchor_draw)
    fusion = RewardFusion(
        method=method,
        anchor_fraction=config.anchor_fraction,
        gate_scope=config.gate_scope,
        seed=seed,
    )
    engine = round_engine(fusion, config, rng, keep)
    executions = np.zeros(num_tasks, dtype=np.int64)
    best = np.full(num_tasks, -np.inf)  # best reward executed, and its deploy score
    best_deploy = np.full(num_tasks, -np.inf)
    totals = {"seconds": 0.0, "wm_seconds": 0.0}
    greedy_rows, best_rows, cost_rows = [], [], []
    record = RunRecord(arm=label or arm, seed=seed)
    start = time.perf_counter()

    def evaluate(step: int, fields: dict[str, Any]) -> None:
        greedy = greedy_scores(policy.logits, bank.deploy)
        deployed = np.where(executions > 0, best_deploy, greedy)
        greedy_rows.append(greedy)
        best_rows.append(deployed)
        cost_rows.append((executions.mean(), totals["seconds"]))
        record.steps.append(
            StepRecord(
                step=step,
                real_exec_seconds=totals["seconds"],
                wall_seconds=time.perf_counter() - start,
                wm_seconds=totals["wm_seconds"],
                real_executions=int(executions.sum()),
                true_score=float(greedy.mean()),
                best_executed_score=float(deployed.mean()),
                **fields,
            )
        )

    evaluate(0, {})
    everyone = np.arange(num_tasks)
    for step in range(1, config.rounds + 1):
        if arm == "real":
            tasks = everyone
        elif arm == ANCHORS_ARM:
            chosen, _ = draw_anchor_tasks(
                executions, num_anchors, plain_draw or config.anchor_draw, rng, config.balance_mix
            )
            tasks = np.flatnonzero(chosen)
        else:
            tasks = everyone
        programs = policy.sample(tasks, group_size).ravel()
        group_ids = np.repeat(tasks, group_size)
        truth = bank.scores[group_ids, programs]
        fields: dict[str, Any] = {}
        prediction = None
        if method == "real":  # every group in the batch is executed
            chosen, pi = np.ones(num_tasks, dtype=bool), np.ones(num_tasks)
        else:
            clock = time.perf_counter()
            prediction = predictions.predict(group_ids, programs)
            totals["wm_seconds"] += time.perf_counter() - clock
            if arm == "wm":
                chosen, pi = np.zeros(num_tasks, dtype=bool), np.zeros(num_tasks)
            else:
                upper = None
                if by_upper:  # tasks are 0..T-1 in order: one priority per task
                    valid = prediction.valid
                    valid = np.isfinite(prediction.scores) if valid is None else valid
                    scores = np.where(valid, prediction.scores, np.nan)
                    std = np.zeros(scores.shape) if prediction.std is None else prediction.std
                    reference = np.where(executions > 0, best, np.nan)[group_ids]
                    upper = ucb_priorities(group_ids, scores, std, config.ucb_kappa, reference)
                    upper = upper[::group_size]
                chosen, pi = draw_anchor_tasks(
                    executions, fused_anchors, config.anchor_draw, rng, config.balance_mix, upper
                )
        finished = play_round(engine, group_ids, prediction, chosen, pi, _replay(truth))
        out, executed = finished.fusion, finished.plan.execute
        if prediction is not None:
            if executed.any():
                predictions.learn(group_ids[executed], programs[executed])
            metrics = out.metrics
            fields = {
                "spearman": within_group_spearman(group_ids, prediction.scores, truth),
                "kappa": float(out.kappa),
                "wm_weight": _number(metrics.get("wm_weight")),
                "anchor_gap": _number(metrics.get("anchor_gap")),
                "residual_mse": _number(metrics.get("residual_mse")),
                "calibration_fallback": metrics.get("calibration_fallback"),
            }
        fields["n_anchor_groups"] = int(np.unique(group_ids[executed]).size)
        done = group_ids[executed]
        np.add.at(executions, done, 1)
        for task, program, reward in zip(done, programs[executed], truth[executed], strict=True):
            if reward > best[task]:  # the first of equal rewards stays
                best[task], best_deploy[task] = reward, bank.deploy[task, program]
        totals["seconds"] += float(bank.seconds[group_ids[executed], programs[executed]].sum())
        policy.update(group_ids, programs, out.advantages)
        evaluate(step, fields)
    record.task_scores = per_task_readings(
        np.array(greedy_rows), np.array(best_rows), np.array(cost_rows), config, bank
    )
    return record


def per_task_readings(
    greedy: np.ndarray,
    best: np.ndarray,
    costs: np.ndarray,
    config: PerTaskConfig,
    bank: TaskBank,
) -> dict[str, list[float]]:
    """Per task, each score (``greedy``, ``best``: rounds x tasks) read at equal rounds
    (``final``: the mean of the last ``last_k`` evaluations), at equal real executions
    (``execB``: the last evaluation with at most ``B`` executions per task on average) and at
    equal real seconds (``secB``: at most the seconds ``B`` executions per task cost at the
    table's mean seconds). Budget readings take one evaluation: averaging the last ``k``
    would mix in rounds far below the budget for an arm that executes 8 per task a round. A
    budget the run never reached is left out; a run that spends nothing reads its final
    evaluation at every budget."""
    per_execution = float(bank.seconds.mean()) * bank.num_tasks
    out: dict[str, list[float]] = {}
    for name, rows in (("greedy", greedy), ("best", best)):
        out[f"{name}@final"] = rows[-config.last_k :].mean(axis=0).tolist()
        for budget in config.budgets:
            for axis, column, cap in (("exec", 0, budget), ("sec", 1, budget * per_execution)):
                spent = costs[-1, column]
                if spent < cap - 1e-9 and spent > 0:
                    continue  # never reached
                last = np.flatnonzero(costs[:, column] <= cap + 1e-9)[-1]
                out[f"{name}@{axis}{budget}"] = rows[last].tolist()
    return out


def within_group_spearman(group_ids: np.ndarray, predicted: np.ndarray, truth: np.ndarray) -> float:
    """Mean over groups of Spearman(predicted, truth) within the group (groups of equal
    size, consecutive; groups where either is constant are left out; NaN when none is left).

    >>> within_group_spearman(np.array([0, 0, 0, 1, 1, 1]), np.array([1, 2, 3, 1, 1, 1.0]),
    ...                       np.array([0.1, 0.2, 0.3, 0.5, 0.4, 0.3]))
    1.0
    """
    size = int(np.unique(group_ids, return_counts=True)[1][0])
    p = stats.rankdata(np.reshape(predicted, (-1, size)), axis=1)
    t = stats.rankdata(np.reshape(truth, (-1, size)), axis=1)
    p, t = p - p.mean(axis=1, keepdims=True), t - t.mean(axis=1, keepdims=True)
    norm = np.sqrt((p**2).sum(axis=1) * (t**2).sum(axis=1))
    varied = norm > 0
    if not varied.any():
        return math.nan
    return float(np.mean((p * t).sum(axis=1)[varied] / norm[varied]))


def _replay(truth: np.ndarray) -> Callable[[np.ndarray], list[ExecResult]]:
    """Runs samples by the execution table: their recorded outcomes as real results."""

    def run(indices: np.ndarray) -> list[ExecResult]:
        return [ExecResult("replay", ExecStatus.OK, score=float(truth[i])) for i in indices]

    return run


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
