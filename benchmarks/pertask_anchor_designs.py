"""Compare anchor designs of the per-task regime, paired by seed and task.

Each design is one ``wmrl bench --regime pertask`` output folder (``--anchor-draw``,
``--execute-per-group``, ``--screening``); the runs of one arm in two folders share seeds
and tasks, so a difference between designs is bootstrapped over the same (seed, task) cells
(:func:`~wmrl_env.bench.pertask_report.bootstrap_mean`). Prints, per arm and design, the
greedy score and the best executed program's score at each budget (reported runs at the
arm's tuned rate), and each design's paired difference from the first folder's.

    python benchmarks/pertask_anchor_designs.py runs/ucb-balanced runs/ucb-ucb ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from wmrl_env.bench.pertask_report import bootstrap_mean, cells_of, gain_text, interval_text
from wmrl_env.bench.records import RunRecord


def main_runs(folder: Path) -> dict[str, list[RunRecord]]:
    """Arm -> the reported runs at its tuned rate (phase ``main``) of one bench folder."""
    runs: dict[str, list[RunRecord]] = {}
    for line in (folder / "runs.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["key"][0] == "main":
            run = RunRecord.from_dict(row["run"])
            runs.setdefault(run.arm, []).append(run)
    return runs


def design_name(folder: Path) -> str:
    config = json.loads((folder / "config.json").read_text())
    name = config["anchor_draw"]
    if config.get("execute_per_group"):
        name += f", screening {config['screening']} {config['execute_per_group']}/"
        name += str(config["group_size"])
    if config.get("world_model", "default") != "default":
        name += f", world model {config['world_model']}"
    return name


def table(
    folders: list[Path], score: str, budgets: list[int], resamples: int, against: str | None
) -> str:
    """One Markdown table; Δ from the first folder's same arm, or its arm ``against``."""
    designs = [(design_name(f), main_runs(f)) for f in folders]
    base_name, base = designs[0]
    arms = [arm for arm in base if any(arm in runs for _, runs in designs)]
    head = " | ".join(f"{b} / task" for b in budgets)
    whom = f"`{against}` under `{base_name}`" if against else f"`{base_name}` (same arm)"
    out = [
        f"{score} score at equal real executions per task; Δ: paired difference from "
        f"{whom}, over the same seeds and tasks",
        "",
        f"| arm | design | {head} |",
        "|---|---|" + "---|" * len(budgets),
    ]
    for arm in arms:
        for name, runs in designs:
            if arm not in runs:
                continue
            cells = []
            for budget in budgets:
                key = f"{score}@exec{budget}"
                mine, theirs = cells_of(runs[arm], key), cells_of(base[against or arm], key)
                if mine is None:
                    cells.append("not reached")
                    continue
                text = interval_text(bootstrap_mean(mine, resamples))
                differs = name != base_name or (against and arm != against)
                if differs and theirs is not None and theirs.shape == mine.shape:
                    text += " Δ " + gain_text(bootstrap_mean(mine - theirs, resamples))
                cells.append(text)
            out.append(f"| {arm} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="bench folders; Δ's base first")
    parser.add_argument("--budgets", nargs="+", type=int, default=[8, 16, 32, 64])
    parser.add_argument("--bootstrap", type=int, default=2000)
    args = parser.parse_args()
    for score in ("best", "greedy"):
        for against in (None, "anchors"):
            print(table(args.folders, score, args.budgets, args.bootstrap, against))
            print()
    print(
        "rates (each arm's, tuned per design):",
        {design_name(f): json.loads((f / "results.json").read_text())["rates"]
         for f in args.folders if (f / "results.json").is_file()},
    )  # fmt: skip


if __name__ == "__main__":
    np.seterr(invalid="ignore")
    main()
