"""The scripted reviser's private-test gain on the second suite, and the simulator's fidelity
on the same real episodes.

:func:`play_starts` plays :class:`~wmrl_env.envs.ml_tasks.reviser.ScriptedReviser` live on
one task of the second suite (validation score as the reward, ``reward="final"``) from each
start seed, once with K turns and once with one turn (the first turn's program alone, so the
first turn's private score is real too), and returns one record per episode: the validation
and private scores and every turn (the observation before it, the program sent, the real
report). :func:`private_gains` and :func:`bootstrap_interval` read the gain (final private
score minus the first turn's) from those records; :func:`turn_fidelity` asks a
:class:`~wmrl_env.envs.ml_tasks.simulator.TurnSimulator` for every real turn of the K-turn
episodes, from the real observation before it, and compares its report with the real one
turn by turn, without a new execution.

Example:
    >>> gains = np.array([[0.1, 0.0], [0.2, 0.1]])
    >>> mean, (low, high) = bootstrap_interval(gains, seed=0)
    >>> round(mean, 3), bool(low <= mean <= high)
    (0.1, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "SUITES",
    "bootstrap_interval",
    "fidelity_markdown",
    "play_starts",
    "private_gains",
    "turn_fidelity",
]


def _suites() -> dict[str, tuple[str, ...]]:
    from wmrl_env.envs.ml_tasks.pool import POOL_TASKS, REAL_POOL_TASKS

    return {"generated": POOL_TASKS, "pool": POOL_TASKS + REAL_POOL_TASKS}


SUITES: dict[str, tuple[str, ...]] = _suites()
"""The second suite's held-out tasks: ``generated`` (``hr_*_s0``) and ``pool`` (those and the
real-data tasks ``rd_*``)."""


def play_starts(
    task: str,
    seeds: Iterable[int],
    turns: int,
    *,
    skip: Iterable[tuple[int, int]] = (),
    executor: Any = "local",
) -> Iterable[dict[str, Any]]:
    """Yield one record per episode of the reviser on ``task``: for each seed, a
    ``turns``-turn episode and a one-turn episode (keys ``task``, ``seed``, ``turns``,
    ``executions``, ``valid_first``, ``valid_final``, ``private``, ``steps``). Pairs
    ``(seed, turns)`` in ``skip`` are not played (a resumed run). ``executor``: ``"local"``
    (live, in the sandbox) or an executor such as
    :func:`~wmrl_env.envs.ml_tasks.pool.pool_replay_executor` (recorded real runs)."""
    from wmrl_env.envs.ml_tasks.multiturn import STOP, MLTaskMultiTurnEnv
    from wmrl_env.envs.ml_tasks.reviser import ScriptedReviser

    skipped = set(skip)
    lengths = (1, turns) if turns > 1 else (1,)
    envs = {k: MLTaskMultiTurnEnv(tasks=[task], executor=executor, max_turns=k, reward="final")
            for k in lengths}  # fmt: skip
    try:
        for seed in seeds:
            for k in lengths:
                if (seed, k) in skipped:
                    continue
                env, reviser = envs[k], ScriptedReviser(seed=seed)
                observation, _ = env.reset(seed=seed)
                steps: list[dict[str, Any]] = []
                terminated, reward, info = False, 0.0, {}
                while not terminated:
                    action = reviser.act(observation)
                    before = observation
                    observation, reward, terminated, _, info = env.step(action)
                    if isinstance(action, str) and action == STOP:
                        break
                    steps.append({
                        "before": before, "program": action.id, "report": observation,
                        "status": info["status"], "error_class": info["error_class"],
                        "score": info["score"],
                    })  # fmt: skip
                yield {
                    "task": task,
                    "seed": seed,
                    "turns": k,
                    "executions": len(env.reports),
                    "valid_first": steps[0]["score"],
                    "valid_final": float(reward),
                    "private": info["private_score"],
                    "steps": steps,
                }
    finally:
        for env in envs.values():
            env.close()


def private_gains(
    records: Mapping[tuple[str, int, int], Mapping[str, Any]],
    tasks: Sequence[str],
    starts: int,
    turns: int,
) -> np.ndarray:
    """Tasks x starts: the K-turn episode's private score minus the one-turn episode's (a
    failed final program counts 0)."""

    def private(task: str, seed: int, k: int) -> float:
        value = records[(task, seed, k)]["private"]
        return 0.0 if value is None else float(value)

    return np.array(
        [[private(t, s, turns) - private(t, s, 1) for s in range(starts)] for t in tasks]
    )


def bootstrap_interval(
    cells: np.ndarray, *, resamples: int = 2000, seed: int = 0
) -> tuple[float, tuple[float, float]]:
    """Mean of a tasks x starts array and its 95 % bootstrap interval (tasks drawn with
    replacement, then starts within each drawn task); NaN cells are left out."""
    cells = np.asarray(cells, dtype=float)
    rng = np.random.default_rng(seed)
    n_tasks, n_starts = cells.shape
    boot = np.empty(resamples)
    for b in range(resamples):
        rows = cells[rng.integers(n_tasks, size=n_tasks)]
        cols = rng.integers(n_starts, size=rows.shape)
        drawn = np.take_along_axis(rows, cols, axis=1)
        boot[b] = np.nanmean(drawn) if np.isfinite(drawn).any() else np.nan
    low, high = np.nanquantile(boot, [0.025, 0.975])
    return float(np.nanmean(cells)), (float(low), float(high))


def turn_fidelity(
    records: Iterable[Mapping[str, Any]],
    world_model: Any,
    *,
    status: str = "most_likely",
    seed: int = 0,
) -> dict[str, Any]:
    """Ask a :class:`~wmrl_env.envs.ml_tasks.simulator.TurnSimulator` over ``world_model``
    for every real turn of ``records`` (episodes of more than one turn that hold their
    ``steps``), from the real observation before it, and compare its report with the real
    one. Returns per turn (key ``"1"``, ``"2"``, ...) and over all turns (``"all"``):
    ``turns``, ``status_accuracy`` (simulated status = real status), ``all_ok_baseline``
    (the share of real turns that ran), ``real_failures``, ``failures_caught`` (real
    failures reported as failures), ``error_class_accuracy`` (over ``classed_failures``,
    the real failures whose report names an error class: the share reported as a failure of
    that class; a replayed run's report may name none), ``score_spearman`` (simulated
    against real score over the ``scored`` turns, where both report one) and ``score_bias``
    (the mean simulated minus real score there); ``"all"`` also holds
    ``within_task_spearman`` (mean over tasks of the Spearman over their scored turns)."""
    from wmrl_env.envs.ml_tasks.programs import ProgramSpec
    from wmrl_env.envs.ml_tasks.simulator import TurnSimulator
    from wmrl_env.envs.ml_tasks.turns import parse_report

    turns = [(r, step) for r in records if r["turns"] > 1 for step in r.get("steps", ())]
    if not turns:
        raise ValueError("no recorded turn of a multi-turn episode to compare with")
    max_turns = max(r["turns"] for r, _ in turns)
    simulator = TurnSimulator(world_model, max_turns=max_turns, status=status, seed=seed)
    before = np.array([step["before"] for _, step in turns], dtype=object)
    programs = np.empty(len(turns), dtype=object)  # structured: an id string is program text
    programs[:] = [ProgramSpec.from_id(step["program"]) for _, step in turns]
    simulated = [parse_report(text) for text in simulator.predict_step(before, programs)
                 .next_observations]  # fmt: skip
    real = [parse_report(step["report"]) for _, step in turns]
    turn_of = np.array([report.turn for report in real])
    task_of = np.array([r["task"] for r, _ in turns])
    real_status = np.array([report.status for report in real])
    sim_status = np.array([report.status for report in simulated])
    real_class = np.array([report.error_class or "" for report in real])  # "": not known
    sim_class = np.array([report.error_class or "" for report in simulated])
    real_score = np.array([np.nan if s.score is None else s.score for s in real])
    sim_score = np.array([np.nan if s.score is None else s.score for s in simulated])

    def figures(mask: np.ndarray) -> dict[str, Any]:
        failed = mask & (real_status != "ok")
        classed = failed & (real_class != "")
        class_hit = (sim_status != "ok") & (sim_class == real_class)
        scored = mask & np.isfinite(real_score) & np.isfinite(sim_score)
        rho = _spearman(sim_score[scored], real_score[scored])
        return {
            "turns": int(mask.sum()),
            "status_accuracy": float((sim_status == real_status)[mask].mean()),
            "all_ok_baseline": float((real_status == "ok")[mask].mean()),
            "real_failures": int(failed.sum()),
            "failures_caught": float((sim_status != "ok")[failed].mean()) if failed.any()
            else None,
            "error_class_accuracy": float(class_hit[classed].mean()) if classed.any() else None,
            "classed_failures": int(classed.sum()),
            "score_spearman": rho,
            "score_bias": float((sim_score - real_score)[scored].mean()) if scored.any()
            else None,
            "scored": int(scored.sum()),
        }  # fmt: skip

    out: dict[str, Any] = {str(t): figures(turn_of == t) for t in range(1, max_turns + 1)}
    out["all"] = figures(np.ones(len(turns), dtype=bool))
    within = []
    for task in sorted(set(task_of)):
        scored = (task_of == task) & np.isfinite(real_score) & np.isfinite(sim_score)
        rho = _spearman(sim_score[scored], real_score[scored])
        if rho is not None:
            within.append(rho)
    out["all"]["within_task_spearman"] = float(np.mean(within)) if within else None
    out["all"]["within_task_spearman_tasks"] = len(within)
    return out


def _spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rho (:func:`~wmrl_env.fusion.calibration.spearman`), ``None`` below three
    pairs or where either side is constant."""
    from wmrl_env.fusion.calibration import spearman

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return spearman(x, y)


def fidelity_markdown(fidelity: Mapping[str, Mapping[str, Any]]) -> str:
    """A table of :func:`turn_fidelity`'s figures, one row per turn and one for all."""

    def number(value: Any, spec: str = ".3f") -> str:
        return "-" if value is None else format(value, spec)

    lines = [
        "| turn | turns | status accuracy | all-ok baseline | real failures (caught) "
        "| error-class accuracy (classed) | score Spearman (scored) | score bias |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, f in fidelity.items():
        caught = "" if f["failures_caught"] is None else f" ({f['failures_caught']:.2f})"
        classed = "" if f["error_class_accuracy"] is None else f" ({f['classed_failures']})"
        lines.append(
            f"| {key} | {f['turns']} | {number(f['status_accuracy'])} "
            f"| {number(f['all_ok_baseline'])} | {f['real_failures']}{caught} "
            f"| {number(f['error_class_accuracy'])}{classed} | {number(f['score_spearman'])} "
            f"({f['scored']}) | {number(f['score_bias'], '+.3f')} |"
        )
    within = fidelity.get("all", {}).get("within_task_spearman")
    if within is not None:
        lines.append(
            f"\nWithin-task score Spearman, all turns: {within:.3f} (mean over "
            f"{fidelity['all']['within_task_spearman_tasks']} tasks)."
        )
    return "\n".join(lines)
