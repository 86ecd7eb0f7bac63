"""World model v4 on the programs a policy proposes: ±1σ / ±2σ coverage, the std's
miscalibration and within-group Spearman on the bench's own (on-policy) groups.

Replays the pool suite's per-task bench (``wmrl bench --full``'s configuration: 120 rounds,
one anchor group a round, balanced draws) for the given arms at the rates the 20-seed
headline run chose, and records, every round, each group's programs, their real rewards
(validation scores, a failure 0) and v4's prediction at that moment (before the round's
anchors teach it). The figures come from the package's fidelity metrics
(:mod:`wmrl_env.fidelity.metrics`) on those records:

* ``reward``: the expected reward against the real reward, with ``predict``'s std (what the
  fusion weighs, and what ``open_space_build --measure`` reports on random groups);
* ``score given ok``: the contract's score given ``ok`` and its std on the runs that were
  ``ok`` (what ``wmrl fidelity`` reports);
* ``rmse / std``: the root mean squared error of the expected reward over the mean
  predicted std (1 for an honest Gaussian std; above 1: the std is too narrow), and the
  factor the std would need to cover 68 % (the 68.3 % quantile of |error| / std);
* within-group Spearman of the expected reward on the round's groups (the bench's own
  ``spearman`` field reads the same).

The run is the bench's: a world model that is only watched (the wrapper passes every call
through), so the policies, draws and rewards are those of ``wmrl bench`` with the same seeds
(the script checks its per-round Spearman against the bench's formula).

    python benchmarks/v4_on_policy_coverage.py --seeds 5 --out runs/v4_on_policy.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.bench.pertask import run_arm
from wmrl_env.bench.pertask import within_group_spearman as bench_spearman
from wmrl_env.bench.pertask_config import PerTaskConfig
from wmrl_env.bench.pool_suite import pool_bank
from wmrl_env.fidelity.cases import Cases
from wmrl_env.fidelity.metrics import score_figures, within_group_spearman
from wmrl_env.world_models import load_ml_world_model
from wmrl_env.world_models.outcomes import STATUSES, OutcomePrediction

RATES = {"wmrl": 1.0, "ppi": 3.0, "wm": 0.3, "debias": 0.3, "denoise": 0.3}
"""The rates ``wmrl bench --full --seeds 20`` chose on its tuning seed (its report)."""


class Watched:
    """v4 as the bench sees it, every ``predict`` recorded with the contract's answer for
    the same programs at the same moment."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []
        self.taught: set[tuple[str, str]] = set()

    def predict(self, contexts, artifacts):
        prediction = self.inner.predict(contexts, artifacts)
        outcome = self.inner.predict_outcomes(contexts, artifacts, failure_score=0.0)
        taught = np.array([(c, a) in self.taught for c, a in zip(contexts, artifacts, strict=True)])
        self.calls.append({"contexts": list(contexts), "programs": list(artifacts),
                           "prediction": prediction, "outcome": outcome,
                           "taught": taught})  # fmt: skip
        return prediction

    def update(self, contexts, artifacts, real_scores) -> None:
        self.taught.update(zip(contexts, artifacts, strict=True))
        self.inner.update(contexts, artifacts, real_scores)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def pool_statuses(bank) -> dict[tuple[str, str], tuple[str, float]]:
    """(task id, program text) -> (contract status, normalised score of an ok run)."""
    from wmrl_env.bench.pool_suite import default_pool_tables
    from wmrl_env.envs.ml_tasks.pool import read_pool
    from wmrl_env.world_models.programs.open_space_data import pool_training_rows

    out: dict[tuple[str, str], tuple[str, float]] = {}
    for path in default_pool_tables():
        held = sorted({r["task_id"] for r in read_pool(path)} & set(bank.task_ids))
        rows = pool_training_rows(path, tasks=held, exclude=())  # measured, never fitted
        for task, program, label, score in zip(rows.task_ids, rows.programs, rows.labels,
                                               rows.score, strict=True):  # fmt: skip
            out[(task, program)] = (label.split(":")[0], float(score))
    return out


def collect(arm: str, seeds: range, rounds: int) -> dict[str, Any]:
    bank = pool_bank()
    config = PerTaskConfig.full(suite="pool", rounds=rounds, arms=(arm,))
    tasks, programs, truth, mean, std, outcomes, groups = [], [], [], [], [], [], []
    rounds_of, checks, taught, per_round = [], [], [], []
    offset = 0
    for seed in seeds:
        watched = Watched(load_ml_world_model("v4"))
        record = run_arm(bank, config, arm, seed, RATES[arm], watched, arm, cache=False)
        recorded = [s.spearman for s in record.steps[1:]]
        for step, call in enumerate(watched.calls, start=1):
            task = np.array([bank.descriptions.index(c) for c in call["contexts"]])
            program = np.array([bank.texts[t].index(p) for t, p in
                                zip(task, call["programs"], strict=True)])  # fmt: skip
            real = bank.scores[task, program]
            p = call["prediction"]
            per_round.append(bench_spearman(task, p.scores, real))
            checks.append((per_round[-1], recorded[step - 1]))
            taught.append(call["taught"])
            size = config.group_size
            groups += [offset + np.arange(i, i + size) for i in range(0, len(task), size)]
            offset += len(task)
            tasks.append(task)
            programs.append(program)
            truth.append(real)
            mean.append(p.scores)
            std.append(p.std)
            outcomes.append(call["outcome"])
            rounds_of.append(np.full(len(task), step))
    gap = max(abs(a - b) for a, b in checks if np.isfinite(a) and np.isfinite(b))
    return {
        "bank": bank, "task": np.concatenate(tasks), "program": np.concatenate(programs),
        "truth": np.concatenate(truth), "mean": np.concatenate(mean),
        "std": np.concatenate(std), "outcome": _concat(outcomes), "groups": groups,
        "round": np.concatenate(rounds_of), "spearman_check_gap": gap,
        "taught": np.concatenate(taught),
        "bench_spearman": float(np.nanmean(per_round)),
    }  # fmt: skip


def _concat(outcomes: list[OutcomePrediction]) -> OutcomePrediction:
    return OutcomePrediction.build(
        np.concatenate([o.status_probs for o in outcomes]),
        np.concatenate([o.score for o in outcomes]),
        np.concatenate([o.std for o in outcomes]),
        np.concatenate([o.known for o in outcomes]),
        outcomes[0].failure_score,
    )


def figures(data: dict[str, Any], rows: np.ndarray, table) -> dict[str, Any]:
    """The figures on the records ``rows`` (whole groups)."""
    bank = data["bank"]
    keep = np.zeros(len(data["truth"]), dtype=bool)
    keep[rows] = True
    renumber = np.cumsum(keep) - 1
    groups = [renumber[g] for g in data["groups"] if keep[g].all()]
    task, program = data["task"][rows], data["program"][rows]
    ids = [bank.task_ids[t] for t in task]
    texts = [bank.texts[t][p] for t, p in zip(task, program, strict=True)]
    status = np.array([table[(i, x)][0] for i, x in zip(ids, texts, strict=True)])
    score = np.array([table[(i, x)][1] if s == "ok" else np.nan for i, x, s in
                      zip(ids, texts, status, strict=True)])  # fmt: skip
    cases = Cases(ids, [bank.descriptions[t] for t in task], texts, status,
                  np.array([""] * len(rows), dtype=object), score, "on-policy")  # fmt: skip
    outcome = data["outcome"]
    contract = OutcomePrediction.build(
        outcome.status_probs[rows], outcome.score[rows], outcome.std[rows],
        outcome.known[rows], 0.0,
    )  # fmt: skip
    truth, mean, std = data["truth"][rows], data["mean"][rows], data["std"][rows]
    assert np.allclose(truth, cases.reward(0.0)), "the bank's reward is the table's"
    # the reward read as a score: every run "ok", its score the reward, predict's std
    rewards = Cases(ids, cases.contexts, texts, np.array(["ok"] * len(rows)), cases.error, truth)
    as_ok = np.zeros((len(rows), len(STATUSES)))
    as_ok[:, 0] = 1.0
    reward_prediction = OutcomePrediction.build(as_ok, mean, std, np.zeros(len(rows), bool), 0.0)
    error = truth - mean
    return {
        "records": len(rows),
        "groups": len(groups),
        "distinct_pairs": len({(t, p) for t, p in zip(task, program, strict=True)}),
        "reward": score_figures(reward_prediction, rewards),
        "reward_rmse": float(np.sqrt(np.mean(error**2))),
        "reward_mean_std": float(np.mean(std)),
        "reward_rmse_over_std": float(np.sqrt(np.mean(error**2)) / np.mean(std)),
        "reward_rms_z": float(np.sqrt(np.mean((error / std) ** 2))),
        "reward_std_factor_for_68": float(np.quantile(np.abs(error) / std, 0.6827)),
        "score_given_ok": score_figures(contract, cases),
        "within_group_spearman": within_group_spearman(contract.expected_reward, truth, groups),
        "within_group_spearman_predict": within_group_spearman(mean, truth, groups),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", nargs="+", default=["wmrl", "ppi", "wm"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=120)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    report: dict[str, Any] = {}
    table = None
    for arm in args.arms:
        data = collect(arm, range(args.seeds), args.rounds)
        table = table or pool_statuses(data["bank"])
        generated = np.array([data["bank"].task_ids[t].startswith("hr_") for t in data["task"]])
        rounds = data["round"]
        parts = {
            "all": np.arange(len(rounds)),
            "generated tasks": np.flatnonzero(generated),
            "real-data tasks": np.flatnonzero(~generated),
            "rounds 1-10": np.flatnonzero(rounds <= 10),
            "rounds 11-40": np.flatnonzero((rounds > 10) & (rounds <= 40)),
            "rounds 41-120": np.flatnonzero(rounds > 40),
            "programs not yet executed on the task": np.flatnonzero(~data["taught"]),
            "programs executed on the task before": np.flatnonzero(data["taught"]),
        }
        report[arm] = {name: figures(data, rows, table) for name, rows in parts.items()
                       if len(rows)}  # fmt: skip
        report[arm]["spearman_check_gap"] = data["spearman_check_gap"]
        report[arm]["bench_spearman"] = data["bench_spearman"]
        for name, f in report[arm].items():
            if not isinstance(f, dict):
                continue
            print(
                f"{arm:6s} {name[:24]:24s} n={f['records']:6d} distinct={f['distinct_pairs']:5d} "
                f"reward ±1/±2σ {f['reward']['coverage_1sd']:.3f}/"
                f"{f['reward']['coverage_2sd']:.3f} rmse/std {f['reward_rmse_over_std']:.2f} "
                f"(rmse {f['reward_rmse']:.3f}, std {f['reward_mean_std']:.3f}, "
                f"68 % at x{f['reward_std_factor_for_68']:.2f}) "
                f"ok-score ±1/±2σ {f['score_given_ok']['coverage_1sd']:.3f}/"
                f"{f['score_given_ok']['coverage_2sd']:.3f} "
                f"spearman {f['within_group_spearman']['mean']:.3f}",
                flush=True,
            )
        print(f"{arm}: the bench's Spearman (mean over rounds) {data['bench_spearman']:.3f}; "
              f"largest gap to the bench's own per-round Spearman "
              f"{data['spearman_check_gap']:.2e}", flush=True)  # fmt: skip
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
