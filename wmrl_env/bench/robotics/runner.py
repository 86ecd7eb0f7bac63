"""One arm of the robot bench with one seed: GRPO on binary success, accounted in sim time.

The base policy is post-trained with :func:`wmrl_env.grpo.train` on a
:class:`~wmrl_env.WorldModelVectorEnv` of ``num_groups`` groups whose members share a
bit-identical start (snapshots), with the arm as the fusion method (``anchors``: the fused
arms' number of groups, all real; :func:`wmrl_env.bench.runner.groups_per_round`). After every
round the fused arms refit their world model on the anchors' real transitions
(:func:`~wmrl_env.grpo.transitions.anchor_transitions`). Every ``eval_every`` rounds the
policy's mean chunks are scored on the fixed held-out starts (not charged).

Every arm's world model (the seed's pretrained one, copied) shadows the arm's real episodes
(``config.shadow``: by default closed, the mean-chunk policy playing the model from the start
with each episode's own sampling noise), so each round also checks the success predictor on
the current policy's own episodes (:mod:`.predictor_check`; for ``wmrl-branch`` also apart on
the episodes of branched groups and of fresh ones). The real envs live in a pool of
``workers`` envs (a group start or a parked episode is restored bit for bit from its snapshot),
borrowed from the seed's :class:`~.start.TaskEnvShelf`: a seed builds ``workers`` robosuite
envs for all its arms, not one per real member or per arm.

The dense arms (``dense``, ``wmrl-dense``) play every group in the simulator, on a vector env
with ``progress_reward``: each real env pays through
:class:`~wmrl_env.robotics.dense_reward.DenseProgressReward` around the arm's own copy of the
seed's pretrained progress model, and after every round the vector env checks the model on
the round's episodes, then updates it on them and recalibrates
(:meth:`~wmrl_env.robotics.dense_reward.ProgressReward.end_round`).

Accounting per round: ``real_steps`` = real chunks played x chunk size (a successful
episode's last chunk counted whole), ``real_exec_seconds`` = the simulator's seconds of those
chunks (the executor's clock around each real job), ``real_executions`` = real episodes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from wmrl_env.bench.config import ANCHORS_ARM
from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.bench.robotics.config import BRANCH_ARMS, DENSE_ARMS, RobotBenchConfig
from wmrl_env.bench.robotics.evaluation import Evaluator
from wmrl_env.bench.robotics.predictor_check import (
    paired_episodes,
    predictor_check,
    round_pairs,
)
from wmrl_env.bench.robotics.start import SeedStart, base_policy
from wmrl_env.bench.robotics.world_model import RandomWorldModel
from wmrl_env.bench.runner import fusion_fields, groups_per_round, grpo_config
from wmrl_env.fusion import RewardFusion
from wmrl_env.wrappers.info import batch_diagnostics

__all__ = ["arm_envs", "imagination", "real_chunks", "run_one"]

FUSED = ("wmrl", "ppi")


def real_chunks(rollout: Any) -> int:
    """Chunks the round played in the real env: the anchors' active steps, plus the recorded
    steps of groups replayed for real at the end (forced anchors)."""
    played = sum(
        int((np.asarray(a) & np.asarray(i["is_anchor"])).sum())
        for a, i in zip(rollout.active, rollout.infos, strict=True)
    )
    final = rollout.final_info
    forced = np.asarray(final["is_anchor"], bool) & ~np.asarray(rollout.infos[0]["is_anchor"])
    return played + int(np.asarray(final["episode_length"])[forced].sum())


def run_one(
    config: RobotBenchConfig,
    arm: str,
    start: SeedStart,
    evaluator: Evaluator,
    start_success: float,
    on_step: Callable[[StepRecord], None] | None = None,
    on_detail: Callable[[str, dict[str, Any]], None] | None = None,
) -> RunRecord:
    """Post-train a fresh copy of ``start``'s base policy with ``arm``; returns its record
    (step 0 is the base policy's ``start_success``, measured once per seed).
    ``on_detail(name, row)`` receives, every round, ``"predictor"``: the world model's
    on-policy check (:mod:`.predictor_check`) on that round's real episodes and on all so far,
    and after every evaluation ``"evaluations"``: its per-start outcomes."""
    from wmrl_env.grpo import train
    from wmrl_env.grpo.transitions import anchor_transitions

    seed = start.seed
    policy, _ = base_policy(config, seed)
    dense = _dense_reward(arm, start)
    method = "real" if arm == ANCHORS_ARM or dense is not None else arm
    method = "wmrl" if arm in BRANCH_ARMS else method
    # every arm's model shadows its real episodes (the on-policy predictor check); only the
    # fused arms' rewards read it, and only they refit it. The dense arms' episodes are all
    # real, scored by their progress model on the real states (checked every round)
    world_model = start.world_model(config) if dense is None else RandomWorldModel(seed)
    fusion = RewardFusion(
        method=method, anchor_fraction=config.anchor_fraction, seed=seed, **config.fusion_options
    )
    chunk = start.chunk_size
    envs = arm_envs(
        config, arm, start.task_envs.lend, world_model, fusion, policy, start.episode_chunks,
        imagine=dense is None, progress_reward=dense, **_branch_starts(config, arm, seed),
    )  # fmt: skip
    record = RunRecord(arm=arm, seed=seed)
    record.steps.append(StepRecord(step=0, true_score=start_success))
    totals = {"seconds": 0.0, "wm": 0.0, "episodes": 0, "steps": 0}
    round_real = {"chunks": 0}
    pairs: dict[str, list[np.ndarray]] = {"scores": [], "successes": [], "groups": [], "ages": []}
    eval_steps_before = evaluator.steps
    began = time.perf_counter()

    def on_round(rollout: Any) -> None:
        round_real["chunks"] = real_chunks(rollout)
        if dense is not None:  # its real scores are dense rewards, not successes
            round_real["progress"] = batch_diagnostics(rollout.final_info)["progress_check"]
            return
        scores, successes, groups = round_pairs(rollout.final_info)
        pairs["scores"].append(scores)
        pairs["successes"].append(successes)
        pairs["groups"].append(groups)
        pairs["ages"].append(start_ages(rollout.final_info))
        if method in FUSED:
            world_model.refit(anchor_transitions(rollout))

    def log(row: dict[str, Any]) -> None:
        totals["seconds"] += row["real_exec_seconds"]
        totals["wm"] += row["wm_seconds"]
        totals["episodes"] += int(row["n_anchor_groups"]) * config.group_size
        totals["steps"] += round_real["chunks"] * chunk
        step = row["iteration"] + 1
        evaluated = step % config.eval_every == 0 or step == config.iterations
        starts = None if step == config.iterations else config.interim_eval_starts
        record.steps.append(
            StepRecord(
                step=step,
                real_exec_seconds=totals["seconds"],
                wall_seconds=time.perf_counter() - began,
                wm_seconds=totals["wm"],
                real_executions=totals["episodes"],
                real_steps=totals["steps"],
                true_score=evaluator.success(policy, starts) if evaluated else math.nan,
                eval_steps=evaluator.steps - eval_steps_before,
                **fusion_fields(row),
            )
        )
        detail = on_detail or (lambda name, row: None)
        if evaluated:
            detail("evaluations", {"arm": arm, "seed": seed, "step": step,
                                   "outcomes": evaluator.outcomes})  # fmt: skip
        if pairs["scores"] and pairs["scores"][-1].size and config.world_model != "random":
            detail("predictor", _predictor_row(arm, seed, step, config.shadow, pairs))
        if round_real.get("progress"):
            detail("predictor", {"arm": arm, "seed": seed, "step": step, "shadow": "real-states",
                                 "round": round_real["progress"], "pooled": None})  # fmt: skip
        if on_step is not None:
            on_step(record.steps[-1])

    grpo = grpo_config(config, seed)
    try:
        train(envs, policy, grpo, log=log, on_round=on_round)
    finally:
        envs.close()
    return record


def arm_envs(
    config: RobotBenchConfig,
    arm: str,
    env_fn: Callable[[], Any],
    world_model: Any,
    fusion: RewardFusion,
    policy: Any,
    episode_chunks: int,
    *,
    imagine: bool = True,
    progress_reward: Any = None,
    **options: Any,
) -> Any:
    """The arm's :class:`~wmrl_env.WorldModelVectorEnv`: ``groups_per_round`` groups of
    ``config.group_size`` multi-step episodes of ``env_fn``'s env, anchors played by a thread
    pool of at most ``config.workers`` envs, each round fused by ``fusion``; with ``imagine``
    the anchors' shadow and the imagined draw read ``policy`` (:func:`imagination`); with
    ``progress_reward`` the envs pay the dense progress reward, co-evolved every round.
    ``options`` go to the vector env (the bench passes none)."""
    from wmrl_env.env_executors import GymEnvExecutor
    from wmrl_env.wrappers import WorldModelVectorEnv

    num_groups = groups_per_round(config, arm)
    workers = min(config.workers, num_groups * config.group_size)
    if progress_reward is not None:
        env_fn = progress_reward.wrap(env_fn)
    executor = GymEnvExecutor(
        env_fn,
        backend="thread",
        num_workers=workers,
        max_envs=workers if config.bounded_envs else None,
    )
    return WorldModelVectorEnv(
        env_fn,
        world_model,
        num_groups,
        config.group_size,
        fusion=fusion,
        executor=executor,
        task="dynamics",
        max_episode_steps=episode_chunks,
        progress_reward=progress_reward,
        **(imagination(config, arm, policy) if imagine else {}),
        **options,
    )


def _branch_starts(config: RobotBenchConfig, arm: str, seed: int) -> dict[str, Any]:
    """The branched arms' ``branch_starts`` argument of the vector env (none for the others)."""
    if arm not in BRANCH_ARMS:
        return {}
    from wmrl_env.wrappers import BranchStarts

    branch = BranchStarts(
        config.branch_groups, config.branch_horizon, keep_rounds=config.branch_rounds, seed=seed
    )
    return {"branch_starts": branch}


def _dense_reward(arm: str, start: SeedStart) -> Any:
    """The dense arms' shared progress reward (``None`` for the other arms): ``dense`` the raw
    progress return, ``wmrl-dense`` half sparse success, half calibrated progress."""
    if arm not in DENSE_ARMS:
        return None
    from wmrl_env.robotics.dense_reward import ProgressReward

    fused = arm == "wmrl-dense"
    return ProgressReward(start.progress_model(), dense_weight=0.5 if fused else 1.0,
                          calibrate=fused)  # fmt: skip


def imagination(config: RobotBenchConfig, arm: str, policy: Any) -> dict[str, Any]:
    """The vector env's arguments that imagine with the current (mean-chunk) policy: the
    anchors' ``shadow`` (closed and continued ones are played by the policy; the mean plus
    each episode's own noise is the sampled chunk again) and, with ``uncertainty_anchors``,
    the fused arms' draw by the world model's uncertainty on the policy's imagined episodes
    (the mean leaves the policy's sampling noise, and so its training, alone); the other arms
    anchor every group or none, which no priority changes."""
    arguments: dict[str, Any] = {"shadow": config.shadow}
    if config.uncertainty_anchors and arm in FUSED:
        arguments["anchor_priority"] = "uncertainty"
    if config.shadow == "open" and "anchor_priority" not in arguments:
        return arguments
    instructions = [getattr(policy, "instruction", "")]

    def mean_chunks(observations: np.ndarray) -> np.ndarray:
        chunks = policy(np.asarray(observations, np.float32), instructions * len(observations))
        return np.clip(chunks, -1.0, 1.0)

    return {**arguments, "imagination_policy": mean_chunks}


def _predictor_row(
    arm: str, seed: int, step: int, shadow: str, pairs: dict[str, list[np.ndarray]]
) -> dict[str, Any]:
    """The on-policy predictor check of round ``step`` and of every round so far, with the
    round's episodes (group, world-model score, real success) to recompute it from."""
    row: dict[str, Any] = {"arm": arm, "seed": seed, "step": step, "shadow": shadow}
    # group ids are per round: number them apart across rounds for the pooled check
    offsets = np.cumsum([0] + [g.max() + 1 if g.size else 0 for g in pairs["groups"][:-1]])
    groups = [g + offset for g, offset in zip(pairs["groups"], offsets, strict=True)]
    latest = (pairs["scores"][-1], pairs["successes"][-1], pairs["groups"][-1])
    pooled = (np.concatenate(pairs["scores"]), np.concatenate(pairs["successes"]),
              np.concatenate(groups))  # fmt: skip
    for name, (scores, successes, ids) in (("round", latest), ("pooled", pooled)):
        row[name] = predictor_check(scores, successes, ids).to_dict() if scores.size else None
    row["round_episodes"] = {
        "group": latest[2].tolist(),
        "wm_score": latest[0].tolist(),
        "success": latest[1].tolist(),
    }
    ages = np.concatenate(pairs["ages"])
    if ages.any():  # branched starts: the check apart on them and on the fresh ones
        row["round_episodes"]["start_age"] = pairs["ages"][-1].tolist()
        for name, chosen in (("pooled_branched", ages > 0), ("pooled_fresh", ages == 0)):
            scores, successes, ids = (part[chosen] for part in pooled)
            row[name] = predictor_check(scores, successes, ids).to_dict() if scores.size else None
    return row


def start_ages(info: dict[str, Any]) -> np.ndarray:
    """Per real episode of :func:`~.predictor_check.round_pairs`, how many chunks into its
    episode its group started (0: a fresh start; all 0 without branched starts)."""
    usable = paired_episodes(info)
    return np.asarray(info.get("start_age", np.zeros(len(usable), np.int64)), np.int64)[usable]
