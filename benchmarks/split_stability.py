"""How stable are program rankings from one train/test split to another?

Samples held-out tasks, runs all 72 grid programs on each under other split seeds, live in
the warm local sandbox, and compares with the committed execution table (split A, the
suite's seed) and the other splits with one another. ``--control`` tasks also run under the
table's own seed, live: they must reproduce the table exactly. Every finished execution is
appended to ``<out>/executions.jsonl`` at once; run the same command again to resume (or
with a larger ``--tasks`` to grow the sample: the sample extends). Tasks run one after
another (control, then every task under the first seed, then under the next), so
``--max-minutes`` stops between tasks. ``--report-only`` writes the comparison of what is
complete without executing anything.

    WMRL_ALLOW_WEAK_ISOLATION=1 PYTHONPATH=. nice -n 10 python benchmarks/split_stability.py \\
        --tasks 39 --split-seeds 1,2 --workers 2
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wmrl_env.bench.split_stability import (
    complete_tasks,
    execute_split,
    markdown,
    read_executions,
    sample_tasks,
    selection_on_other_split,
    split_scores,
    stability,
)

OUT = "docs/figures/split_stability"
BUDGETS = (8, 16, 32, 72)
"""random-search budgets read on the other split (72: every program, the oracle)"""


@dataclass
class Args:
    tasks: int = 12
    sample_seed: int = 0
    split_seeds: str = "1,2"
    control: int = 2
    workers: int = 2
    out: str = OUT
    max_minutes: float = 0.0
    report_only: bool = False


def run(args: Args) -> dict:
    from wmrl_env.envs.ml_tasks import task_ids
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
    from wmrl_env.envs.ml_tasks.tasks import SPLIT_SEED

    log = Path(args.out) / "executions.jsonl"
    seeds = [int(seed) for seed in args.split_seeds.split(",")]
    sample = sample_tasks(task_ids("heldout"), args.tasks, args.sample_seed)
    # the control: the first tasks again under the table's own split, live
    plan = [(t, SPLIT_SEED) for t in sample[: args.control]]
    plan += [(t, seed) for seed in seeds for t in sample]
    started = time.perf_counter()
    if not args.report_only:
        sandbox = default_sandbox(max_workers=args.workers, warm=True, suite_programs=True)
        try:
            for number, (task_id, seed) in enumerate(plan, start=1):
                minutes = (time.perf_counter() - started) / 60
                if args.max_minutes and minutes >= args.max_minutes:
                    print(f"stopping after {minutes:.1f} min, before step {number}")
                    break
                print(f"{number}/{len(plan)}: {task_id}, split seed {seed}")
                execute_split([task_id], seed, log, sandbox)
        finally:
            sandbox.close()
    return report(read_executions(log), sample, seeds, SPLIT_SEED, Path(args.out))


def report(executions, sample, seeds, table_seed, folder: Path) -> dict:
    """Compare the table's split with every other split, and the other splits pairwise,
    each pair on the sampled tasks complete under both; write results.json and results.md."""
    from wmrl_env.bench.bank import TaskBank

    complete = {"table": list(sample)}
    complete.update({f"seed {s}": complete_tasks(executions, sample, s) for s in seeds})
    seed_of = {f"seed {s}": s for s in seeds}

    def scores(name: str, tasks: list[str]) -> np.ndarray:
        if name == "table":
            return TaskBank.of(tasks).scores
        return split_scores(executions, tasks, seed_of[name])

    names = list(complete)
    pairs, pair_tasks, selections = {}, {}, []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            tasks = [t for t in complete[a] if t in set(complete[b])]
            if tasks:
                pairs[f"{a} vs {b}"] = stability(scores(a, tasks), scores(b, tasks))
                pair_tasks[f"{a} vs {b}"] = tasks
                for x, y in ((a, b), (b, a)):  # chosen on one split, read on the other
                    selections.append(
                        selection_on_other_split(scores(x, tasks), scores(y, tasks), BUDGETS, 200)
                    )
    if not pairs:
        return {"tasks": 0}
    done = [t for t in sample if any(t in tasks for tasks in pair_tasks.values())]
    mine = [e for e in executions if e.task_id in done and e.split_seed in seeds]
    control = complete_tasks(executions, sample, table_seed)
    drift = (
        float(
            np.abs(
                TaskBank.of(control).scores - split_scores(executions, control, table_seed)
            ).max()
        )
        if control
        else None
    )
    selection = {
        k: {
            "same_split": float(np.mean([np.mean(s[k][0]) for s in selections])),
            "other_split": float(np.mean([np.mean(s[k][1]) for s in selections])),
        }
        for k in BUDGETS
    }
    selection["best constant, chosen on train"] = _constant_on_every_split(scores, names, done)
    summary = {
        "split_seeds": seeds,
        "selection_read_on_the_other_split": selection,
        "pairs": {name: {**r.summary(), "task_ids": pair_tasks[name]} for name, r in pairs.items()},
        "executions": len(mine),
        "mean_exec_seconds": sum(e.exec_seconds for e in mine) / len(mine),
        "failed": sum(e.status != "ok" for e in mine),
        "control_tasks": control,
        "control_max_abs_difference_from_table": drift,
    }
    first = next(iter(pairs))
    text = f"Split A = the table's split, B = {first.split(' vs ')[1]}, per task:\n\n"
    text += markdown(pair_tasks[first], pairs[first]) + "\n\nEvery pair of splits:\n\n"
    text += pairs_markdown(pairs) + "\n\n" + selection_markdown(selection)
    if control:
        text += (
            f"\n\nControl: {len(control)} tasks re-executed live under the table's own split "
            f"differ from the table by at most {drift:.2g} (normalised score).\n"
        )
    folder.mkdir(parents=True, exist_ok=True)
    plot(pairs, selection, folder / "split_stability.png")
    (folder / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    (folder / "results.md").write_text(text)
    print(text)
    return summary


def _constant_on_every_split(scores, names: list[str], tasks: list[str]) -> dict[str, float]:
    """The best constant program (chosen on the train split's table) on every split:
    chosen without the held-out tasks' scores, it should score alike on every split."""
    from wmrl_env.bench.suite import ScoreTable, split_tasks

    constant = int(ScoreTable.of(split_tasks("train")).scores.mean(axis=0).argmax())
    return {name: float(scores(name, tasks)[:, constant].mean()) for name in names}


def plot(pairs: dict, selection: dict, path: Path) -> None:
    """Left: each task's Spearman between two splits (every pair). Right: random search's
    pick read on the split that chose it and on another split, against the budget, with
    the best constant and the uniform policy."""
    from wmrl_env.bench.plots import _pyplot

    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    values = [np.sort(result.spearman) for result in pairs.values()]
    for name, sorted_values in zip(pairs, values, strict=True):
        left.plot(np.arange(1, len(sorted_values) + 1), sorted_values, marker=".", label=name)
    left.set(xlabel="held-out task (sorted)", ylabel="Spearman of the 72 programs' scores")
    left.set_title("program rankings, one split vs another")
    left.legend(fontsize=8)
    right.plot(BUDGETS, [selection[k]["same_split"] for k in BUDGETS], "o-",
               label="read on the split that chose it (what the bench reports)")  # fmt: skip
    right.plot(BUDGETS, [selection[k]["other_split"] for k in BUDGETS], "s-",
               label="read on another split")  # fmt: skip
    constant = np.mean(list(selection["best constant, chosen on train"].values()))
    uniform = np.mean([result.b_uniform.mean() for result in pairs.values()])
    right.axhline(constant, color="grey", ls="--", label="best constant (chosen on train)")
    right.axhline(uniform, color="grey", ls=":", label="uniform policy")
    right.set_xscale("log", base=2)
    right.set_xticks(BUDGETS, [str(k) for k in BUDGETS])
    right.set(xlabel="random search: programs executed per task (72: oracle)",
              ylabel="normalised score, mean over tasks")  # fmt: skip
    right.set_title("the best executed program on a fresh split")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def selection_markdown(selection: dict) -> str:
    lines = [
        "| pick | score on the split that chose it | score on another split |",
        "|---|---|---|",
    ]
    for k in BUDGETS:
        row = selection[k]
        what = "oracle: best of all 72" if k == 72 else f"random search: best of {k}"
        lines.append(f"| {what} | {row['same_split']:.3f} | {row['other_split']:.3f} |")
    constant = selection["best constant, chosen on train"]
    values = " / ".join(f"{v:.3f}" for v in constant.values())
    lines.append(f"| best constant, chosen on train ({' / '.join(constant)}) | {values} | |")
    return "\n".join(lines)


def pairs_markdown(pairs: dict) -> str:
    lines = [
        "| splits | tasks | Spearman | same best | other split's score of a split's best "
        "(mean both ways) | uniform |",
        "|---|---|---|---|---|---|",
    ]
    for name, result in pairs.items():
        s = result.summary()
        lines.append(
            f"| {name} | {int(s['tasks'])} | {s['spearman']:.3f} ± {s['spearman_se']:.3f} "
            f"| {s['top1_agreement']:.2f} ± {s['top1_agreement_se']:.2f} "
            f"| {1 - s['regret_both_ways']:.3f} | {s['b_uniform']:.3f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in vars(Args()).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(default), default=default)
    summary = run(Args(**vars(parser.parse_args())))
    print(json.dumps({k: v for k, v in summary.items() if k != "task_ids"}, indent=1))
