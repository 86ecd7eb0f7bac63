"""Arms x seeds of examples/trl_code_policy.py, resumable, then one table and one plot.

Each (arm, seed) runs in its own process (``nice``), skipped when its ``result.json`` exists;
a run that stopped resumes from its last checkpoint. The summary reads every result:

* greedy real score per task before and after GRPO, the mean change with a 95 % t-interval
  over (seed, task) pairs;
* the sampled programs' mean real score before and after, and their run share;
* real executions, charged execution seconds, wall seconds per run;
* the world model's Spearman on the executed programs outside the 72-program grid.

    python benchmarks/trl_code_policy.py --arms real,anchors,wmrl,ppi --seeds 0,1,2,3 --steps 8
    python benchmarks/trl_code_policy.py --summary-only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trl_code_policy.py"


def run(arm: str, seed: int, out_dir: Path, extra: list[str], timeout_s: int) -> None:
    if (out_dir / f"{arm}-seed{seed}" / "result.json").is_file():
        return
    command = ["nice", "-n", "10", sys.executable, str(EXAMPLE), "--arm", arm, "--seed", str(seed)]
    command += ["--out-dir", str(out_dir), *extra]
    print("running", " ".join(command), flush=True)
    subprocess.run(command, check=False, timeout=timeout_s)


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval (normal quantile past 30 values)."""
    from scipy.stats import t

    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return float(x.mean()), math.nan, math.nan
    half = t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean()), float(x.mean() - half), float(x.mean() + half)


def summary(out_dir: Path) -> tuple[str, dict]:
    results: dict[str, list[dict]] = {}
    for path in sorted(out_dir.glob("*-seed*/result.json")):
        record = json.loads(path.read_text())
        results.setdefault(record["args"]["arm"], []).append(record)
    lines = [
        "| arm | runs | greedy before | greedy after | change (95 % CI) | sampled before → after "
        "| sampled run share after | real executions / run | exec s / run | wall s / run "
        "| WM Spearman off-grid (n) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    table = {}
    for arm in ("real", "anchors", "wmrl", "ppi"):
        if arm not in results:
            continue
        runs = results[arm]
        before = [v for r in runs for v in r["before"]["greedy"].values()]
        after = [v for r in runs for v in r["after"]["greedy"].values()]
        change = interval([a - b for a, b in zip(after, before, strict=True)])
        pairs = [(r["wm_spearman_off_grid"], r["off_grid_executed"]) for r in runs]
        table[arm] = {
            "runs": len(runs),
            "greedy_before": float(np.mean(before)),
            "greedy_after": float(np.mean(after)),
            "change": change,
            "sampled_before": float(np.mean([r["before"]["sampled"]["mean_score"] for r in runs])),
            "sampled_after": float(np.mean([r["after"]["sampled"]["mean_score"] for r in runs])),
            "runs_after": float(np.mean([r["after"]["sampled"]["runs"] for r in runs])),
            "real_executions": float(np.mean([r["real_executions"] for r in runs])),
            "exec_seconds": float(np.mean([r["real_exec_seconds"] for r in runs])),
            "wall_seconds": float(np.mean([r["wall_seconds"] for r in runs])),
            "spearman": [p for p in pairs],
        }
        row = table[arm]
        spearman = ", ".join(f"{s:.2f} ({n})" for s, n in pairs)
        lines.append(
            f"| {arm} | {len(runs)} | {row['greedy_before']:.3f} | {row['greedy_after']:.3f} "
            f"| {change[0]:+.3f} ({change[1]:+.3f}, {change[2]:+.3f}) "
            f"| {row['sampled_before']:.3f} → {row['sampled_after']:.3f} | {row['runs_after']:.2f} "
            f"| {row['real_executions']:.0f} | {row['exec_seconds']:.0f} "
            f"| {row['wall_seconds']:.0f} | {spearman} |"
        )
    return "\n".join(lines) + "\n", table


def plot(table: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(table)
    x = np.arange(len(arms))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for offset, key, label in ((-0.2, "before", "before GRPO"), (0.2, "after", "after GRPO")):
        left.bar(x + offset, [table[a][f"greedy_{key}"] for a in arms], 0.4, label=label)
        right.bar(x + offset, [table[a][f"sampled_{key}"] for a in arms], 0.4, label=label)
    for axis, title in (
        (left, "greedy program, real score"),
        (right, "sampled programs, real score"),
    ):
        axis.set_xticks(x, [f"{a}\n{table[a]['real_executions']:.0f} real exec." for a in arms])
        axis.set_ylim(0, 1)
        axis.set_title(title)
    left.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="real,anchors,wmrl,ppi")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--out-dir", default="runs/trl_code_policy")
    parser.add_argument("--timeout-s", type=int, default=900, help="per run")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--figure", default="docs/figures/trl_code_policy.png")
    args, extra = parser.parse_known_args()
    out_dir = Path(args.out_dir)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not args.summary_only:
        for seed in (int(s) for s in args.seeds.split(",")):
            for arm in args.arms.split(","):
                try:
                    run(arm, seed, out_dir, extra, args.timeout_s)
                except subprocess.TimeoutExpired:
                    print(f"{arm} seed {seed}: past {args.timeout_s} s, resumes next time")
    text, table = summary(out_dir)
    print(text)
    (out_dir / "summary.md").write_text(text)
    if table:
        plot(table, Path(args.figure))


if __name__ == "__main__":
    main()
