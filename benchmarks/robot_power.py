"""How many seeds, held-out starts and rounds the robot bench needs (docs/history.md,
"How many seeds, starts and rounds"), from the per-seed spread of finished runs.

Reads ``runs.jsonl`` (and, where present, ``evaluations.jsonl`` / ``seeds.jsonl`` with the
per-start outcomes) of one or more ``wmrl bench --domain robosuite`` folders. The model of one
seed's measured improvement (final minus start success on the same ``n`` held-out starts)::

    d = delta + u + e,   Var(u) = tau2 (between seeds),   Var(e) = f / n (evaluation)

where ``f`` is the share of starts whose outcome differs between the two evaluations (paired
on the same starts, ``f`` minus the squared mean change, to be exact). ``f`` comes from the
per-start outcomes when a folder has them, else the bound ``2 p (1 - p)`` of independent
outcomes at the observed mean success ``p``; ``tau2`` is what is left of the observed variance
of ``d`` over seeds. A comparison of two arms on the same seed (``wmrl`` minus ``anchors``)
has the same form with both finals in place of final and start.

For a 95 % t-interval over ``k`` seeds to exclude 0 with probability ``power`` when the true
mean is ``delta``: ``delta >= (t_{0.975, k-1} + t_{power, k-1}) * sqrt((tau2 + f / n) / k)``.
Prints the smallest such ``k`` for the observed spread, several ``delta`` and ``n``.

    python benchmarks/robot_power.py docs/figures/robot_bench
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def read(folder: Path, name: str) -> list[dict]:
    path = folder / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def finals(folders: list[Path]) -> tuple[dict, dict]:
    """``{(folder, seed): start}``, ``{arm: {(folder, seed): final}}``."""
    starts, by_arm = {}, defaultdict(dict)
    for folder in folders:
        for run in read(folder, "runs.jsonl"):
            key = (str(folder), run["seed"])
            starts[key] = run["steps"][0]["true_score"]
            by_arm[run["arm"]][key] = run["steps"][-1]["true_score"]
    return starts, by_arm


def curves(folders: list[Path]) -> dict[str, dict[int, list[float]]]:
    """Per arm and evaluated step: each seed's success minus its start."""
    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for folder in folders:
        for run in read(folder, "runs.jsonl"):
            start = run["steps"][0]["true_score"]
            for step in run["steps"][1:]:
                if step["true_score"] == step["true_score"]:  # evaluated (not NaN)
                    out[run["arm"]][step["step"]].append(step["true_score"] - start)
    return out


def flip_share(folders: list[Path], arm: str, other: str | None) -> float | None:
    """Mean share of starts whose outcome differs between ``arm``'s final evaluation and the
    seed's start (``other=None``) or ``other``'s final, over seeds with per-start outcomes."""
    shares = []
    for folder in folders:
        evaluations = read(folder, "evaluations.jsonl")
        last: dict[tuple[str, int], tuple[int, list]] = {}
        for row in evaluations:
            key = (row["arm"], row["seed"])
            if key not in last or row["step"] > last[key][0]:
                last[key] = (row["step"], row["outcomes"])
        starts = {s["seed"]: s.get("start_outcomes") for s in read(folder, "seeds.jsonl")}
        for (name, seed), (_, outcomes) in last.items():
            if name != arm:
                continue
            base = starts.get(seed) if other is None else last.get((other, seed), (0, None))[1]
            if base is None or len(base) != len(outcomes):
                continue
            a, b = np.asarray(outcomes, bool), np.asarray(base, bool)
            shares.append(float(np.mean(a != b)) - float(np.mean(a) - np.mean(b)) ** 2)
    return float(np.mean(shares)) if shares else None


def seeds_needed(delta: float, tau2: float, f: float, n: int, power: float) -> int | None:
    """Smallest number of seeds (up to 10,000) whose t-interval excludes 0 with ``power``."""
    from scipy import stats

    for k in range(2, 10_001):
        se = np.sqrt((tau2 + f / n) / k)
        if delta >= (stats.t.ppf(0.975, k - 1) + stats.t.ppf(power, k - 1)) * se:
            return k
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--power", type=float, default=0.8)
    parser.add_argument("--deltas", type=float, nargs="+", default=[0.05, 0.1, 0.15, 0.2])
    parser.add_argument("--starts", type=int, nargs="+", default=[12, 50, 200])
    args = parser.parse_args(argv)
    starts, by_arm = finals(args.folders)
    n_now = None
    for folder in args.folders:
        for name in ("config.json", "config-seed0.json"):
            if (folder / name).exists():
                n_now = json.loads((folder / name).read_text()).get("eval_starts", n_now)
    comparisons = [(arm, None) for arm in by_arm] + [
        (arm, "anchors") for arm in ("wmrl", "ppi", "real") if arm in by_arm and "anchors" in by_arm
    ]
    for arm, by_step in curves(args.folders).items():
        cells = ", ".join(
            f"round {step}: {np.mean(values):+.3f} (SD {np.std(values, ddof=1):.3f})"
            for step, values in sorted(by_step.items())
            if len(values) > 1
        )
        print(f"{arm} over the start by round (mean over seeds): {cells}")
    for arm, other in comparisons:
        keys = sorted(k for k in by_arm[arm] if other is None or k in by_arm[other])
        base = [starts[k] if other is None else by_arm[other][k] for k in keys]
        d = np.asarray([by_arm[arm][k] for k in keys]) - np.asarray(base)
        if len(d) < 2:
            continue
        n = n_now or 12
        f = flip_share(args.folders, arm, other)
        source = "per-start outcomes"
        if f is None:
            p = float(np.mean([by_arm[arm][k] for k in keys] + base))
            f, source = 2 * p * (1 - p), "bound 2p(1-p)"
        variance = float(np.var(d, ddof=1))
        tau2 = max(0.0, variance - f / n)
        label = f"{arm} - {'start' if other is None else other}"
        print(
            f"{label}: {len(d)} seeds, mean {d.mean():+.3f}, SD {np.sqrt(variance):.3f}; "
            f"evaluation share f = {f:.3f} ({source}), f/n = {f / n:.4f} at n = {n}, "
            f"between seeds tau^2 = {tau2:.4f}"
        )
        for delta in args.deltas:
            needed = [seeds_needed(delta, tau2, f, m, args.power) for m in args.starts]
            cells = ", ".join(
                f"{m} starts: {k if k else '>10,000'}"
                for m, k in zip(args.starts, needed, strict=True)
            )
            print(f"    seeds for a true {delta:+.2f} at {args.power:.0%} power: {cells}")


if __name__ == "__main__":
    main()
