"""The multi-turn transfer check with the code LM as the reviser.

The same behaviour-cloned :class:`~wmrl_env.code_policy.lm_reviser.LMReviser` (one start, made
by :func:`~wmrl_env.code_policy.lm_reviser.make_lm_reviser`) is post-trained per arm and seed
with GRPO over whole episodes on the ``train`` tasks, through
:class:`~wmrl_env.wrappers.WorldModelVectorEnv` exactly as the tabular check
(:mod:`wmrl_env.bench.multiturn`: ``real``, ``anchors``, ``wmrl``, ``wm``): each round the
fused per-episode advantages weight the log-probabilities of every program the LM wrote in
that episode. Then it is scored on the ``heldout`` tasks, in the **real** multi-turn env and in
the simulator from the same sampling seed: the best score of an episode, and how the LM behaves
under each feedback (how often it stops early, repeats a program of the episode, or follows a
failed run with one that runs).

Real executions replay the committed execution table when it holds the program (the LM was
cloned on its programs) and run live in the local sandbox otherwise; ``live_executions``
counts those.

``suite="pool"`` runs it on the second suite, with the pieces of the tabular check: GRPO on
the world model's pretraining tasks, scores on the held-out ``hr_*_s0`` and ``rd_*`` tasks
(:func:`~wmrl_env.bench.multiturn.suite_tasks`), real turns replayed from the pool tables
(which hold the 72 grid programs the LM can write on every task), and ``real_private``: the
private-test score of each real episode's best program by validation, on which the gain over
``anchors`` is read. Pass the open-space world model (``load_ml_world_model("v4")``).

Example:
    >>> LMTransferConfig(rounds=2, seeds=2).anchor_groups
    2
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.bench.multiturn import (
    TransferConfig,
    _deployed_private,
    _fmt,
    _gain_key,
    _make_envs,
    _obs_array,
    suite_tasks,
)
from wmrl_env.envs.ml_tasks import STOP, MLTaskMultiTurnEnv
from wmrl_env.envs.ml_tasks.env import resolve_task
from wmrl_env.envs.ml_tasks.simulator import TurnSimulator
from wmrl_env.envs.ml_tasks.turns import TurnReport, parse_report

__all__ = [
    "LMTransferConfig",
    "behaviour",
    "evaluate_lm",
    "lm_markdown",
    "lm_summary_rows",
    "run_lm_transfer",
    "t_interval",
    "train_lm_arm",
]

BEHAVIOUR_KEYS: tuple[str, ...] = ("best", "first", "stop_rate", "repeat_rate", "fix_rate")


@dataclass
class LMTransferConfig(TransferConfig):
    """Sizes of the LM transfer check (defaults: the recorded run)."""

    seeds: int = 3
    rounds: int = 8
    num_groups: int = 8
    group_size: int = 4
    anchor_fraction: float = 0.25
    learning_rate: float = 5e-4
    eval_every: int = 8
    eval_episodes: int = 2
    heldout_tasks: int = 12
    temperature: float = 1.0
    bc_seed: int = 0


def behaviour(
    reports: Sequence[Sequence[TurnReport]],
    programs: Sequence[Sequence[str]],
    stopped: Sequence[bool],
) -> dict[str, float]:
    """Per-episode means: best and first score (a failure or no run: 0), the share of episodes
    that stopped before their last turn, the share of revisions (turn 2 on) that repeat a
    program of the episode, and the share of turns after a failed run whose program ran
    (NaN where no run failed)."""
    best = [max((r.score or 0.0 for r in rs), default=0.0) for rs in reports]
    first = [rs[0].score or 0.0 if rs else 0.0 for rs in reports]
    failures = [sum(r.status != "ok" for r in rs) for rs in reports]
    revisions = [p in ps[:k] for ps in programs for k, p in enumerate(ps) if k > 0]
    after_failure = [
        rs[k + 1].status == "ok" for rs in reports for k in range(len(rs) - 1)
        if rs[k].status != "ok"
    ]  # fmt: skip
    return {
        "best": float(np.mean(best)),
        "first": float(np.mean(first)),
        "stop_rate": float(np.mean(stopped)),
        "repeat_rate": float(np.mean(revisions)) if revisions else math.nan,
        "fix_rate": float(np.mean(after_failure)) if after_failure else math.nan,
        "failures_per_episode": float(np.mean(failures)),
    }


def evaluate_lm(
    reviser: Any,
    tasks: list[str],
    config: LMTransferConfig,
    world_model: Any,
    seed: int,
    executor: Any,
) -> dict[str, float]:
    """The reviser's sampled episodes on ``tasks`` for real and in the simulator, from the
    same sampling seed: ``real_*`` and ``sim_*`` :func:`behaviour` figures, ``sim_minus_real``
    (best score) and ``live_executions`` (real runs the table did not hold); on the second
    suite also ``real_private``, the private score of each real episode's best program by
    validation."""
    out: dict[str, float] = {}
    starts = [t for t in tasks for _ in range(config.eval_episodes)]
    for where in ("real", "sim"):
        reviser.reseed([seed, 991])
        n = len(starts)
        observations = [resolve_task(t).description for t in starts]
        last: list[str | None] = [None] * n
        reports: list[list[TurnReport]] = [[] for _ in starts]
        programs: list[list[str]] = [[] for _ in starts]
        reported: list[list[str]] = [[] for _ in starts]  # the program of each report
        stopped, done = [False] * n, [False] * n
        envs = []
        if where == "real":
            live_before = getattr(executor, "n_live", 0)
            for k, task in enumerate(starts):
                env = MLTaskMultiTurnEnv(tasks=[task], executor=executor,
                                         max_turns=config.max_turns)  # fmt: skip
                env.reset(seed=k)
                envs.append(env)
        simulator = TurnSimulator(world_model, max_turns=config.max_turns, seed=seed)
        for _ in range(config.max_turns):
            active = [k for k in range(n) if not done[k]]
            if not active:
                break
            actions, _ = reviser.act([observations[k] for k in active], [last[k] for k in active])
            if where == "real":
                steps = [envs[k].step(a) for k, a in zip(active, actions, strict=True)]
                texts = [s[0] for s in steps]
                ends = [s[2] for s in steps]
            else:
                step = simulator.predict_step(
                    _obs_array([observations[k] for k in active]), _obs_array(actions)
                )
                texts, ends = list(step.next_observations), list(step.terminations)
            for k, action, text, end in zip(active, actions, texts, ends, strict=True):
                if action == STOP:
                    stopped[k] = done[k] = True
                    continue
                observations[k], last[k] = text, action
                programs[k].append(action)
                report = parse_report(text)
                if report is not None:
                    reports[k].append(report)
                    reported[k].append(action)
                done[k] = bool(end)
        if where == "real" and config.suite == "pool":
            out["real_private"] = float(np.mean([
                _deployed_private(task, rs, ps, executor)
                for task, rs, ps in zip(starts, reports, reported, strict=True)
            ]))  # fmt: skip
        for env in envs:
            env.close()
        figures = behaviour(reports, programs, stopped)
        out |= {f"{where}_{key}": value for key, value in figures.items()}
        if where == "real":
            out["live_executions"] = float(getattr(executor, "n_live", 0) - live_before)
    out["sim_minus_real"] = out["sim_best"] - out["real_best"]
    return out


def train_lm_arm(
    arm: str,
    seed: int,
    config: LMTransferConfig,
    world_model: Any,
    heldout: list[str],
    reviser_path: str | Path,
    executor: Any,
) -> dict[str, Any]:
    """Post-train the cloned reviser with one arm's GRPO; returns its checkpoints (real
    executions, held-out figures) and each round's loss."""
    from wmrl_env.code_policy.lm_reviser import LMReviser

    reviser = LMReviser.load(
        reviser_path, learning_rate=config.learning_rate, temperature=config.temperature,
        seed=seed,
    )  # fmt: skip
    envs = _make_envs(arm, seed, config, world_model, executor=executor)
    executions, checkpoints, losses = 0, [], []
    for round_index in range(1, config.rounds + 1):
        observations, info = envs.reset(seed=seed * 100_003 + round_index)
        n = envs.num_envs
        last: list[str | None] = [None] * n
        turns: list[list[Any]] = [[] for _ in range(n)]
        done = np.zeros(n, dtype=bool)
        while not done.all():
            active = [k for k in range(n) if not done[k]]
            texts, generated = reviser.act([observations[k] for k in active],
                                           [last[k] for k in active])  # fmt: skip
            actions: list[Any] = [STOP] * n
            for k, text, turn in zip(active, texts, generated, strict=True):
                actions[k], last[k] = text, text
                turns[k].append(turn)
            observations, _, terminated, truncated, info = envs.step(actions)
            done = done | terminated | truncated
        executions += int(info["episode_length"][info["is_anchor"]].sum())
        advantages = np.asarray(info["advantage"], dtype=np.float64)
        flat = [(t, advantages[k]) for k in range(n) for t in turns[k]]
        losses.append(reviser.update([t for t, _ in flat], [a for _, a in flat]))
        if round_index % config.eval_every == 0 or round_index == config.rounds:
            scores = evaluate_lm(reviser, heldout, config, world_model, seed, executor)
            checkpoints.append({"round": round_index, "real_executions": executions, **scores})
    envs.close()
    return {"arm": arm, "seed": seed, "checkpoints": checkpoints, "losses": losses}


def run_lm_transfer(
    config: LMTransferConfig,
    world_model: Any,
    reviser_path: str | Path,
    executor: Any,
    finished: Sequence[dict[str, Any]] = (),
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every arm x seed from the cloned reviser in ``reviser_path``; ``finished`` runs are
    kept (a stopped check resumes). ``untrained``: the clone itself, before GRPO."""
    from wmrl_env.code_policy.lm_reviser import LMReviser

    heldout = suite_tasks(config)[1][: config.heldout_tasks or None]
    clone = LMReviser.load(reviser_path, temperature=config.temperature)
    untrained = evaluate_lm(clone, heldout, config, world_model, 0, executor)
    runs = list(finished)
    done = {(run["arm"], run["seed"]) for run in runs}
    for seed in range(config.seeds):
        for arm in config.arms:
            if (arm, seed) in done:
                continue
            runs.append(
                train_lm_arm(arm, seed, config, world_model, heldout, reviser_path, executor)
            )
            if on_run is not None:
                on_run(runs[-1])
    return {"config": asdict(config), "untrained": untrained, "runs": runs}


def lm_summary_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per arm, the last checkpoint's figures: mean and Student-t 95 % interval over seeds
    (:func:`t_interval`), and the paired gain over ``anchors`` where it ran (real best
    score; on the second suite the real private score)."""
    finals: dict[str, dict[int, dict[str, Any]]] = {}
    for run in results["runs"]:
        finals.setdefault(run["arm"], {})[run["seed"]] = run["checkpoints"][-1]
    keys = ["real_executions", "sim_minus_real", "live_executions"] + [
        f"{where}_{key}" for where in ("real", "sim") for key in BEHAVIOUR_KEYS
    ]
    gain_key = _gain_key(results)
    if gain_key not in keys:
        keys.append(gain_key)
    rows = []
    for arm, by_seed in finals.items():
        row: dict[str, Any] = {"arm": arm, "seeds": len(by_seed)}
        for key in keys:
            if any(key not in c for c in by_seed.values()):
                continue
            values = np.array([c[key] for c in by_seed.values()], dtype=np.float64)
            row[key] = t_interval(values[np.isfinite(values)])
        if "anchors" in finals and arm != "anchors":
            common = sorted(set(by_seed) & set(finals["anchors"]))
            gains = [by_seed[s][gain_key] - finals["anchors"][s][gain_key] for s in common]
            row["gain_over_anchors"] = t_interval(np.array(gains))
        rows.append(row)
    return rows


def t_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and Student-t 95 % interval of ``values`` (NaN bounds below 2 values, all NaN
    for none): with a handful of seeds the normal quantile would be too narrow.

    >>> [round(v, 3) for v in t_interval(np.array([1.0, 2.0, 3.0]))]
    [2.0, -0.484, 4.484]
    """
    if values.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(values.mean())
    if values.size < 2:
        return mean, math.nan, math.nan
    from scipy import stats

    half = float(stats.t.ppf(0.975, values.size - 1)) * float(values.std(ddof=1))
    half /= math.sqrt(values.size)
    return mean, mean - half, mean + half


def lm_markdown(results: dict[str, Any]) -> str:
    """Two tables: real and simulated held-out scores per arm (on the second suite also the
    real private score, on which the gain over ``anchors`` is read), and behaviour sim vs
    real."""
    config, untrained = results["config"], results["untrained"]
    rows = lm_summary_rows(results)
    private = _gain_key(results) == "real_private"
    extra = ("| real private score (best by validation) ", "|---") if private else ("", "")
    lines = [
        f"Held-out tasks ({config['heldout_tasks'] or 'all'}), best score of a sampled "
        f"{config['max_turns']}-turn episode written by the code LM (mean [Student-t 95 % "
        "interval] over seeds; real = replayed or live executions):",
        "",
        f"| arm | seeds | real executions | real score {extra[0]}| simulated score | sim - real "
        f"| gain over anchors (paired{', private' if private else ''}) |",
        f"|---|---|---|---{extra[1]}|---|---|---|",
        f"| cloned LM, no GRPO | | 0 | {untrained['real_best']:.3f} "
        + (f"| {untrained['real_private']:.3f} " if private else "")
        + f"| {untrained['sim_best']:.3f} | {untrained['sim_minus_real']:+.3f} | |",
    ]
    for row in rows:
        gain = row.get("gain_over_anchors")
        lines.append(
            f"| {row['arm']} | {row['seeds']} | {row['real_executions'][0]:.0f} "
            f"| {_fmt(row['real_best'])} "
            + (f"| {_fmt(row['real_private'])} " if private else "")
            + f"| {_fmt(row['sim_best'])} | {_fmt(row['sim_minus_real'], signed=True)} "
            f"| {'' if gain is None else _fmt(gain, signed=True)} |"
        )
    lines += [
        "",
        "Behaviour on the held-out episodes, real / simulated feedback (means over seeds):",
        "",
        "| arm | stops early | repeats a program | runs after a failure | first-turn score |",
        "|---|---|---|---|---|",
    ]
    named = [("cloned LM, no GRPO", {k: (v, math.nan, math.nan) for k, v in untrained.items()})]
    for row in [*named, *((r["arm"], r) for r in rows)]:
        arm, figures = row
        cells = [
            f"{_num(figures[f'real_{key}'][0])} / {_num(figures[f'sim_{key}'][0])}"
            for key in ("stop_rate", "repeat_rate", "fix_rate", "first")
        ]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _num(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.2f}"
