"""The transfer check for multi-turn ML agents: train in simulation, score for real.

One :class:`~wmrl_env.bench.revision_policy.RevisionPolicy` per arm and seed is trained with
GRPO over episodes of :class:`~wmrl_env.envs.ml_tasks.MLTaskMultiTurnEnv` on the ``train``
tasks, through :class:`~wmrl_env.wrappers.WorldModelVectorEnv` with a
:class:`~wmrl_env.envs.ml_tasks.simulator.TurnSimulator`:

* ``real``: every group's episodes run for real;
* ``anchors``: only the anchor groups run (for real), the others are not played: the same
  real executions as ``wmrl``, no world model;
* ``wmrl``: every group played, the anchor groups' episodes for real, the others simulated
  turn by turn, rewards fused by :class:`~wmrl_env.fusion.RewardFusion`;
* ``wm``: every episode simulated, nothing real (the reward-hacking control).

Every arm is then scored on the **real** env on the ``heldout`` tasks (the best score of a
sampled episode of ``max_turns`` turns), and on the simulator on the same tasks: the
sim-to-real gap, and how often the policy meets a failure it must fix under each feedback.
Real scores replay the committed execution table (each turn one real execution).

``suite="pool"`` runs the same check on the second suite: the policy trains on the world
model's pretraining tasks (``hr_*_s1``, ``hr_*_s2``), is scored on the held-out tasks
(``hr_*_s0`` and the real-data ``rd_*``), real turns replay the pool tables
(:func:`~wmrl_env.envs.ml_tasks.pool.pool_replay_executor`), and each real episode also
reports ``real_private``: the private-test score of its best program by validation (what
would be deployed); the gain over ``anchors`` is then read on that private score. Pass the
open-space world model (``load_ml_world_model("v4")``).

Example:
    >>> from wmrl_env.bench.multiturn import TransferConfig
    >>> TransferConfig(rounds=2, seeds=1).anchor_groups
    2
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.bench.revision_policy import RevisionPolicy
from wmrl_env.envs.ml_tasks import STOP, MLTaskMultiTurnEnv, ProgramSpec, task_ids
from wmrl_env.envs.ml_tasks.env import resolve_task
from wmrl_env.envs.ml_tasks.programs import render_program
from wmrl_env.envs.ml_tasks.simulator import TurnSimulator
from wmrl_env.envs.ml_tasks.turns import parse_report
from wmrl_env.fusion import RewardFusion
from wmrl_env.wrappers.vector import WorldModelVectorEnv

__all__ = [
    "ARMS",
    "TransferConfig",
    "evaluate",
    "markdown",
    "run_transfer",
    "summary_rows",
    "train_arm",
    "transfer_fingerprint",
]

ARMS: tuple[str, ...] = ("real", "anchors", "wmrl", "wm")


@dataclass
class TransferConfig:
    """Sizes of the transfer check (defaults: the recorded run)."""

    arms: tuple[str, ...] = ARMS
    seeds: int = 3
    rounds: int = 24
    num_groups: int = 16
    group_size: int = 4
    anchor_fraction: float = 0.125
    max_turns: int = 3
    learning_rate: float = 1.0
    eval_every: int = 8
    eval_episodes: int = 2
    heldout_tasks: int = 0  # 0: every held-out task
    suite: str = "first"  # "first", or "pool": the second suite, scored on its private test

    def __post_init__(self) -> None:
        if self.suite not in ("first", "pool"):
            raise ValueError(f"suite must be 'first' or 'pool', got {self.suite!r}")
        unknown = set(self.arms) - set(ARMS)
        if unknown:
            raise ValueError(f"unknown arms {sorted(unknown)}; choose from {ARMS}")
        if self.rounds < 1 or self.seeds < 1 or self.num_groups < 1 or self.group_size < 2:
            raise ValueError("rounds, seeds, num_groups >= 1 and group_size >= 2")
        if not 0 < self.anchor_fraction <= 1:
            raise ValueError(f"anchor_fraction must be in (0, 1], got {self.anchor_fraction}")

    @property
    def anchor_groups(self) -> int:
        """Anchor groups per round (at least 1)."""
        return max(1, round(self.anchor_fraction * self.num_groups))


def _obs_array(items: list[Any]) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        array[i] = item
    return array


def suite_tasks(config: TransferConfig) -> tuple[list[str], list[str]]:
    """The train and held-out task ids of ``config.suite``."""
    if config.suite == "pool":
        from wmrl_env.bench.multiturn_private import SUITES
        from wmrl_env.bench.pool_suite import default_pretraining_table
        from wmrl_env.envs.ml_tasks.pool import read_pool

        train = sorted({row["task_id"] for row in read_pool(default_pretraining_table())})
        return train, list(SUITES["pool"])
    return list(task_ids("train")), list(task_ids("heldout"))


def _suite_executor(suite: str) -> Any:
    return _pool_replay_executor() if suite == "pool" else _replay_executor()


def _make_envs(
    arm: str, seed: int, config: TransferConfig, world_model: Any, executor: Any = None
) -> WorldModelVectorEnv:
    method = {"real": "real", "anchors": "real", "wmrl": "wmrl", "wm": "wm"}[arm]
    groups = config.anchor_groups if arm == "anchors" else config.num_groups
    fusion = RewardFusion(
        method, anchor_fraction=config.anchor_groups / config.num_groups, seed=seed
    )
    make_env = functools.partial(
        MLTaskMultiTurnEnv,
        tasks=suite_tasks(config)[0],
        executor=_suite_executor(config.suite) if executor is None else executor,
        max_turns=config.max_turns,
        reward="best",
    )
    simulator = TurnSimulator(world_model, max_turns=config.max_turns, reward="best", seed=seed)
    return WorldModelVectorEnv(
        make_env,
        simulator,
        num_groups=groups,
        group_size=config.group_size,
        fusion=fusion,
        executor="inline",
        max_episode_steps=config.max_turns,
    )


def train_arm(
    arm: str, seed: int, config: TransferConfig, world_model: Any, heldout: list[str]
) -> dict[str, Any]:
    """Train one policy; returns its checkpoints (real executions, real and simulated
    held-out scores) and its final parameters."""
    envs = _make_envs(arm, seed, config, world_model)
    policy = RevisionPolicy()
    rng = np.random.default_rng([seed, 17])
    executions, checkpoints = 0, []
    for round_index in range(1, config.rounds + 1):
        observations, info = envs.reset(seed=seed * 100_003 + round_index)
        episodes = [policy.new_episode() for _ in range(envs.num_envs)]
        done = np.zeros(envs.num_envs, dtype=bool)
        while not done.all():
            actions = [
                STOP if d else e.act(o, rng)
                for e, o, d in zip(episodes, observations, done, strict=True)
            ]
            observations, _, terminated, truncated, info = envs.step(actions)
            done = terminated | truncated
        executions += int(info["episode_length"][info["is_anchor"]].sum())
        advantages = np.asarray(info["advantage"], dtype=np.float64)
        gradient = sum(a * e.grad for a, e in zip(advantages, episodes, strict=True))
        policy.params += config.learning_rate * gradient / envs.num_envs
        if round_index % config.eval_every == 0 or round_index == config.rounds:
            scores = evaluate(policy, heldout, config, world_model, seed)
            checkpoints.append({"round": round_index, "real_executions": executions, **scores})
    envs.close()
    return {"arm": arm, "seed": seed, "checkpoints": checkpoints, "params": policy.params.tolist()}


def evaluate(
    policy: RevisionPolicy,
    tasks: list[str],
    config: TransferConfig,
    world_model: Any,
    seed: int,
) -> dict[str, float]:
    """The policy's sampled episodes on ``tasks``, played for real (replay) and in the
    simulator from the same draws: mean best score, first-turn score and fix rate of each
    (on the second suite also ``real_private``: the private score of each real episode's
    best program by validation)."""
    out: dict[str, float] = {}
    for where in ("real", "sim"):
        rng = np.random.default_rng([seed, 991])
        starts = [t for t in tasks for _ in range(config.eval_episodes)]
        episodes = [policy.new_episode() for _ in starts]
        observations = [resolve_task(t).description for t in starts]
        reports: list[list[Any]] = [[] for _ in starts]
        sent: list[list[Any]] = [[] for _ in starts]
        envs = []
        if where == "real":
            replay = _suite_executor(config.suite)  # one for every env: read once
            for k, task in enumerate(starts):
                env = MLTaskMultiTurnEnv(tasks=[task], executor=replay,
                                         max_turns=config.max_turns)  # fmt: skip
                env.reset(seed=k)
                envs.append(env)
        simulator = TurnSimulator(world_model, max_turns=config.max_turns, seed=seed)
        for _ in range(config.max_turns):
            actions = [e.act(o, rng) for e, o in zip(episodes, observations, strict=True)]
            for k, action in enumerate(actions):
                sent[k].append(action)
            if where == "real":
                observations = [env.step(a)[0] for env, a in zip(envs, actions, strict=True)]
            else:
                step = simulator.predict_step(_obs_array(observations), _obs_array(actions))
                observations = list(step.next_observations)
            for k, text in enumerate(observations):
                reports[k].append(parse_report(text))
        if where == "real" and config.suite == "pool":
            out["real_private"] = float(np.mean([
                _deployed_private(task, rs, actions, replay)
                for task, rs, actions in zip(starts, reports, sent, strict=True)
            ]))  # fmt: skip
        for env in envs:
            env.close()
        best = [max((r.score or 0.0 for r in rs), default=0.0) for rs in reports]
        first = [rs[0].score or 0.0 for rs in reports]
        failures = [sum(r.status != "ok" for r in rs) for rs in reports]
        out[f"{where}_best"] = float(np.mean(best))
        out[f"{where}_first"] = float(np.mean(first))
        out[f"{where}_failures_per_episode"] = float(np.mean(failures))
        out[f"{where}_fixes_per_episode"] = float(np.mean([e.fixes for e in episodes]))
    out["sim_minus_real"] = out["sim_best"] - out["real_best"]
    return out


def _deployed_private(task_id: str, reports: list[Any], actions: list[Any], executor: Any) -> float:
    """The private score of the episode's best program by validation (0 if none ran); an
    action is a structured program or, like the multi-turn env reads it, program text."""
    ran = [(r.score, a) for r, a in zip(reports, actions, strict=True)
           if r is not None and r.score is not None]  # fmt: skip
    if not ran:
        return 0.0
    task = resolve_task(task_id)
    best = max(ran, key=lambda pair: pair[0])[1]
    program = best if isinstance(best, str) else render_program(ProgramSpec.from_action(best),
                                                                task.kind)  # fmt: skip
    value = executor.run([task.make_job(program)])[0].metadata.get("private_score")
    return 0.0 if value is None else float(value)


@functools.lru_cache(maxsize=1)
def _pool_replay_executor() -> Any:
    from wmrl_env.envs.ml_tasks.pool import pool_replay_executor

    return pool_replay_executor()


@functools.lru_cache(maxsize=1)
def _replay_executor() -> Any:
    from wmrl_env.envs.ml_tasks import load_table

    return load_table().replay_executor()


def run_transfer(
    config: TransferConfig,
    world_model: Any,
    finished: Sequence[dict[str, Any]] = (),
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every arm x seed; the results as one JSON-able dict. ``finished`` runs (from an earlier
    call's ``on_run``) are kept, not run again: a stopped check resumes."""
    heldout = suite_tasks(config)[1]
    if config.heldout_tasks:
        heldout = heldout[: config.heldout_tasks]
    untrained = evaluate(RevisionPolicy(), heldout, config, world_model, seed=0)
    runs = list(finished)
    done = {(run["arm"], run["seed"]) for run in runs}
    for seed in range(config.seeds):
        for arm in config.arms:
            if (arm, seed) in done:
                continue
            runs.append(train_arm(arm, seed, config, world_model, heldout))
            if on_run is not None:
                on_run(runs[-1])
    return {"config": asdict(config), "untrained": untrained, "runs": runs}


RESUMABLE_FIELDS = frozenset({"arms", "seeds"})
"""Config fields a finished run does not depend on (each run is keyed by its arm and seed):
a rerun may change them."""


def transfer_fingerprint(
    config: TransferConfig, world_model: str, reviser: str | Path | None = None
) -> dict[str, Any]:
    """What a finished run of the transfer check was made with: the config fields it depends
    on, the package version, the digest of every file of ML world model ``world_model``
    (``"v3"``, ``"v4"``, ...) and, for the LM check, of every file of the cloned reviser
    folder ``reviser``. A rerun into the same log reuses runs only when this is unchanged."""
    from wmrl_env.bench.run_log import file_digest, fingerprint, world_model_digests

    made = world_model_digests(world_model)
    if reviser is not None:
        files = sorted(p for p in Path(reviser).rglob("*") if p.is_file())
        made["reviser"] = {str(p.relative_to(reviser)): file_digest(p) for p in files}
    return fingerprint(asdict(config), RESUMABLE_FIELDS, **made)


def markdown(results: dict[str, Any]) -> str:
    """The transfer table: each arm's real and simulated held-out scores at its last round."""
    config, untrained = results["config"], results["untrained"]
    private = _gain_key(results) == "real_private"
    extra = ("| real private score (best by validation) ", "|---") if private else ("", "")
    lines = [
        f"Held-out tasks, best score of a sampled {config['max_turns']}-turn episode "
        f"(mean [95 % interval] over {config['seeds']} seeds; real = replayed executions):",
        "",
        f"| arm | real executions | real score {extra[0]}| simulated score | sim - real | "
        f"gain over anchors (paired{', private' if private else ''}) |",
        f"|---|---|---{extra[1]}|---|---|---|",
        f"| untrained policy | 0 | {untrained['real_best']:.3f} "
        + (f"| {untrained['real_private']:.3f} " if private else "")
        + f"| {untrained['sim_best']:.3f} | {untrained['sim_minus_real']:+.3f} | |",
    ]
    for row in summary_rows(results):
        gain = row.get("gain_over_anchors")
        lines.append(
            f"| {row['arm']} | {row['real_executions'][0]:.0f} | {_fmt(row['real_best'])} "
            + (f"| {_fmt(row['real_private'])} " if private else "")
            + f"| {_fmt(row['sim_best'])} | {_fmt(row['sim_minus_real'], signed=True)} "
            f"| {'' if gain is None else _fmt(gain, signed=True)} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(value: tuple[float, float, float], signed: bool = False) -> str:
    mean, low, high = value
    spec = "+.3f" if signed else ".3f"
    if not math.isfinite(mean):
        return "n/a"
    if math.isnan(low):
        return format(mean, spec)
    return f"{mean:{spec}} [{low:{spec}}, {high:{spec}}]"


def summary_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per arm, the final checkpoint's figures: mean and a normal 95 % interval over seeds,
    and the paired gain over ``anchors`` where it ran."""
    finals: dict[str, dict[int, dict[str, Any]]] = {}
    for run in results["runs"]:
        finals.setdefault(run["arm"], {})[run["seed"]] = run["checkpoints"][-1]
    rows = []
    gain_key = _gain_key(results)
    for arm, by_seed in finals.items():
        row: dict[str, Any] = {"arm": arm}
        for key in ("real_best", "sim_best", "sim_minus_real", "real_executions", "real_private",
                    "real_failures_per_episode", "sim_failures_per_episode"):  # fmt: skip
            if any(key not in c for c in by_seed.values()):
                continue
            values = np.array([c[key] for c in by_seed.values()], dtype=np.float64)
            row[key] = _mean_interval(values)
        if "anchors" in finals and arm != "anchors":
            common = sorted(set(by_seed) & set(finals["anchors"]))
            gains = np.array(
                [by_seed[s][gain_key] - finals["anchors"][s][gain_key] for s in common]
            )
            row["gain_over_anchors"] = _mean_interval(gains)
        rows.append(row)
    return rows


def _gain_key(results: dict[str, Any]) -> str:
    """What the gain over ``anchors`` reads: the private score on the second suite."""
    return "real_private" if results["config"].get("suite") == "pool" else "real_best"


def _mean_interval(values: np.ndarray) -> tuple[float, float, float]:
    mean = float(values.mean())
    if values.size < 2:
        return mean, math.nan, math.nan
    half = 1.96 * float(values.std(ddof=1)) / math.sqrt(values.size)
    return mean, mean - half, mean + half
