"""World-model benchmarks: throughput per backend, and held-out accuracy on the ML task suite.

    python benchmarks/bench_world_models.py throughput [--out runs/bench_wm]
    python benchmarks/bench_world_models.py heldout    [--out runs/bench_wm]
    python benchmarks/bench_world_models.py anchors    [--out runs/bench_wm] [--repeats 10]
    python benchmarks/bench_world_models.py programs   [--versions v3,v2]

``throughput``: predictions per second at batch 64 and 256 for the embedding regressor
(all-MiniLM-L6-v2 + ridge) and the causal-LM scorer (a tiny random Qwen2, i.e. the plumbing's
cost, not a real LM's), on task-suite descriptions and programs, in three regimes:
``cold`` (every text new: the encoder runs on every item), ``grpo`` (each context repeated
8 times, as in a GRPO group; programs new) and ``warm`` (contexts and programs seen before:
cache hits, the case of a structured action space).

``heldout``: fits on the execution table's train tasks, predicts its held-out tasks
(``envs/ml_tasks``), and reports Spearman and MSE against the real scores before and after
isotonic calibration (cross-fitted: fitted on half of the held-out pairs, scored on the
other half, both ways), against a constant predictor; compares the regression heads; writes
a calibration-curve PNG. Needs the committed execution table (``wmrl build-tables``).

``programs``: programs per CPU-second of the committed ML world models only (the speed
section of ``anchors``, :func:`program_throughput`).

``anchors``: world models v2 (``ProgramTaskWorldModel``) and v3
(``ProgramProfileWorldModel``), each pretrained afresh on ``--fit-split`` (default the
``wm`` and ``train`` splits; never a held-out task), on every held-out task: within-task
Spearman and top-1 regret (best real score among the task's programs that were not anchors
minus that of the predicted best), zero-shot and after 1, 2, 4 and 8 anchor groups of 8
programs of the task fed through ``update()``, drawn ``uniform`` (distinct, random) or
``on_policy`` (with repeats, from a softmax policy concentrated on a few good programs),
``--repeats`` draws each, scored on the task's other programs; the share of real scores
inside +-1 and +-1.96 predicted std; programs per CPU-second at batch 256 for new code, new
texts of known code and cached texts, against ``ast.parse`` in the same run
(:func:`program_throughput`). Failed executions score 0, the reward they get.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr
from sklearn.isotonic import IsotonicRegression

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GROUP_SIZE = 8


def task_texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    """``n`` (description, program) pairs from the task suite, each program made unique."""
    from wmrl_env.envs.ml_tasks import ALL_TASKS, get_task
    from wmrl_env.envs.ml_tasks.programs import ProgramSpec, render_program

    rng = np.random.default_rng(seed)
    contexts, artifacts = [], []
    for i in range(n):
        task = get_task(ALL_TASKS[rng.integers(len(ALL_TASKS))])
        spec = ProgramSpec.from_index(int(rng.integers(72)))
        contexts.append(task.description)
        artifacts.append(render_program(spec, task.kind) + f"\n# sample {seed}-{i}\n")
    return contexts, artifacts


def time_predict(model, contexts, artifacts, batch: int) -> float:
    start = time.perf_counter()
    for i in range(0, len(artifacts), batch):
        model.predict(contexts[i : i + batch], artifacts[i : i + batch])
    return len(artifacts) / (time.perf_counter() - start)


def throughput(out: Path) -> dict:
    from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor
    from wmrl_env.world_models.embeddings.encoder import TextEncoder
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
    from wmrl_env.world_models.lm.tiny_lm import build_tiny_causal_lm

    train_c, train_a = task_texts(32, seed=0)
    regressor = EmbeddingRegressor(TextEncoder()).fit(
        train_c, train_a, np.random.default_rng(0).random(32)
    )
    tiny = CausalLMScorer(build_tiny_causal_lm(tempfile.mkdtemp()), min_score_mass=0.0)
    results = {}
    for name, model in (("embedding_regressor", regressor), ("causal_lm_tiny", tiny)):
        for batch in (64, 256):
            n = batch
            contexts, artifacts = task_texts(n, seed=batch)
            grouped = [contexts[i - i % GROUP_SIZE] for i in range(n)]
            _, fresh = task_texts(n, seed=10 * batch)
            encoder = getattr(model, "encoder", None)
            if encoder is not None:
                encoder.clear_cache()
            row = {"cold": time_predict(model, contexts, artifacts, batch)}
            row["grpo"] = time_predict(model, grouped, fresh, batch)
            row["warm"] = time_predict(model, contexts, artifacts, batch)
            results[f"{name}@{batch}"] = {k: round(v, 1) for k, v in row.items()}
            print(name, batch, results[f"{name}@{batch}"], flush=True)
    return results


def table_pairs(split: str):
    from wmrl_env.envs.ml_tasks import HELDOUT_TASKS, TRAIN_TASKS, get_task
    from wmrl_env.envs.ml_tasks.tables import load_table

    tasks = set(TRAIN_TASKS if split == "train" else HELDOUT_TASKS)
    rows = [r for r in load_table().rows if r.task_id in tasks and r.status == "ok"]
    contexts = [get_task(r.task_id).description for r in rows]
    return contexts, [r.program() for r in rows], np.array([r.score for r in rows]), rows


def cross_fitted_calibration(scores: np.ndarray, real: np.ndarray, seed: int) -> np.ndarray:
    """Isotonic map fitted on one random half of the pairs, applied to the other, and back."""
    half = np.random.default_rng(seed).permutation(len(real)) < len(real) // 2
    out = np.empty_like(scores)
    for fit_on in (half, ~half):
        iso = IsotonicRegression(increasing=True, out_of_bounds="clip")
        out[~fit_on] = iso.fit(scores[fit_on], real[fit_on]).predict(scores[~fit_on])
    return out


def evaluate(name: str, predicted: np.ndarray, std: np.ndarray | None, real: np.ndarray) -> dict:
    calibrated = cross_fitted_calibration(predicted, real, seed=0)
    half = np.random.default_rng(0).permutation(len(real)) < len(real) // 2
    constant = np.where(half, real[~half].mean(), real[half].mean())  # same cross-fitting
    row = {
        "spearman": spearmanr(predicted, real).statistic,
        "mse_raw": np.mean((predicted - real) ** 2),
        "mse_calibrated": np.mean((calibrated - real) ** 2),
        "mse_constant": np.mean((constant - real) ** 2),
    }
    if std is not None:
        row["spearman_std_vs_abs_error"] = spearmanr(std, np.abs(predicted - real)).statistic
    print(name, {k: round(float(v), 4) for k, v in row.items()}, flush=True)
    return {k: float(v) for k, v in row.items()}


def heldout(out: Path) -> dict:
    from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor
    from wmrl_env.world_models.embeddings.encoder import TextEncoder
    from wmrl_env.world_models.embeddings.heads import HEADS

    train_c, train_a, train_y, _ = table_pairs("train")
    test_c, test_a, test_y, _ = table_pairs("heldout")
    print(f"train pairs {len(train_y)}, held-out pairs {len(test_y)}", flush=True)
    encoder = TextEncoder()
    results, curves = {}, {}
    for head in HEADS:
        start = time.perf_counter()
        model = EmbeddingRegressor(encoder, head=head, seed=0).fit(train_c, train_a, train_y)
        fit_seconds = time.perf_counter() - start
        prediction = model.predict(test_c, test_a)
        results[head] = evaluate(head, prediction.scores, prediction.std, test_y)
        results[head]["fit_seconds"] = round(fit_seconds, 1)
        curves[head] = prediction.scores
    plot_calibration(curves, test_y, out / "calibration_curve.png")
    return results


def plot_calibration(curves: dict[str, np.ndarray], real: np.ndarray, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    bins = np.linspace(0, 1, 11)
    for ax, calibrate in zip(axes, (False, True), strict=True):
        for name, predicted in curves.items():
            x = cross_fitted_calibration(predicted, real, 0) if calibrate else predicted
            which = np.clip(np.digitize(x, bins) - 1, 0, 9)
            filled = [b for b in range(10) if (which == b).sum() >= 5]
            ax.plot(
                [x[which == b].mean() for b in filled],
                [real[which == b].mean() for b in filled],
                marker="o",
                label=name,
            )
        ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel("calibrated prediction" if calibrate else "raw prediction")
        ax.set_title(("after" if calibrate else "before") + " isotonic calibration (held-out)")
    axes[0].set_ylabel("mean real score in bin")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


POLICIES = ("uniform", "on_policy")


def anchor_draw(policy: str, real: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Positions of ``n`` anchors among a task's programs: ``uniform`` (distinct, random) or
    ``on_policy`` (with repeats, from a softmax policy concentrated on a few good programs:
    :func:`~wmrl_env.world_models.programs.program_profile.on_policy_draw`)."""
    from wmrl_env.world_models.programs.program_profile import on_policy_draw

    if policy == "uniform":
        return rng.permutation(len(real))[:n]
    return on_policy_draw(real, n, rng)


def within_task_metrics(model, pairs, n_groups: int, policy: str, repeats: int, seed: int) -> dict:
    """Spearman, top-1 regret and interval coverage on each task's programs that were not
    anchors, after ``n_groups`` anchor groups of :data:`GROUP_SIZE` programs of the task
    (drawn by ``policy``) fed through ``update()``; the task's other rows never reach the
    model."""
    contexts, programs, real = pairs
    contexts = np.array(contexts, dtype=object)
    rng = np.random.default_rng(seed)
    spearman, regret, z = [], [], []
    for task in dict.fromkeys(contexts):
        members = np.flatnonzero(contexts == task)
        for _ in range(repeats if n_groups else 1):
            model.reset_task()
            anchors = members[anchor_draw(policy, real[members], n_groups * GROUP_SIZE, rng)]
            rest = np.setdiff1d(members, anchors)
            if n_groups:
                model.update(list(contexts[anchors]), [programs[i] for i in anchors], real[anchors])
            p = model.predict(list(contexts[rest]), [programs[i] for i in rest])
            spearman.append(spearmanr(p.scores, real[rest]).statistic)
            regret.append(real[rest].max() - real[rest][np.argmax(p.scores)])
            z.append(np.abs(p.scores - real[rest]) / p.std)
    z = np.concatenate(z)
    row = {
        "spearman": float(np.nanmean(spearman)),
        "spearman_se": float(np.nanstd(spearman) / np.sqrt(len(spearman))),
        "top1_regret": float(np.mean(regret)),
        "coverage_68": float(np.mean(z <= 1.0)),
        "coverage_95": float(np.mean(z <= 1.96)),
        "n_predictions": len(z),
    }
    shown = {k: round(v, 3) for k, v in row.items()}
    print(f"  {policy} anchor groups {n_groups}:", shown, flush=True)
    return row


def program_throughput(model, contexts: list[str], batch: int = 256, rounds: int = 4) -> dict:
    """Programs per CPU-second of this process (what one idle core would do; on the shared
    machine the wall figure mostly measures the other jobs), at batch ``batch``, GRPO
    groups of 8 sharing a task, every task seen before: ``new_code`` (every program has a
    statement no program had: parsed), ``new_comment`` (every text unseen, but it differs
    from one seen before only by a comment line: not parsed again) and ``cached`` (the
    same batches again); ``parse_only`` is ``ast.parse`` of the ``new_code`` texts alone,
    the baseline the others are divided by (``*_per_parse``), timed in the same run."""
    import ast

    from wmrl_env.envs.ml_tasks.programs import all_programs, render_program

    specs = all_programs()

    def texts(tag: str) -> list[list[str]]:
        return [
            [
                render_program(specs[i % len(specs)], "binary") + tag.format(r=r, i=i)
                for i in range(batch)
            ]
            for r in range(rounds)
        ]

    grouped = [contexts[(i // GROUP_SIZE) % len(contexts)] for i in range(batch)]
    model.predict(grouped, texts("")[0])  # the tasks' features: computed once per task
    regimes = {
        "new_code": texts("_round_{r}_item_{i} = {i}\n"),
        "new_comment": texts("# round {r} item {i}\n"),
    }
    regimes["cached"] = regimes["new_code"]
    n = batch * rounds
    cpu = time.process_time()
    for batch_texts in regimes["new_code"]:
        for text in batch_texts:
            ast.parse(text)
    out = {"parse_only_cpu": round(n / (time.process_time() - cpu), 1)}
    for regime, batches in regimes.items():
        wall, cpu = time.perf_counter(), time.process_time()
        for batch_texts in batches:
            model.predict(grouped, batch_texts)
        out[f"{regime}_cpu"] = round(n / (time.process_time() - cpu), 1)
        out[f"{regime}_wall"] = round(n / (time.perf_counter() - wall), 1)
        out[f"{regime}_per_parse"] = round(out[f"{regime}_cpu"] / out["parse_only_cpu"], 3)
    return out


def anchors(out: Path, versions: list[str], repeats: int, fit_split: str) -> dict:
    """World models v2 and v3 side by side on the held-out tasks (see the module doc)."""
    from wmrl_env.world_models.programs.ml_default import (
        pretrain_ml_world_model,
        pretraining_tasks,
        table_training_pairs,
    )

    fit_tasks = pretraining_tasks(fit_split)
    eval_tasks = pretraining_tasks("heldout")
    assert not set(fit_tasks) & set(eval_tasks), "never evaluate on tasks used for fitting"
    pairs = table_training_pairs(eval_tasks)
    results = {"fit_split": fit_split, "n_fit_tasks": len(fit_tasks), "repeats": repeats}
    results["eval_tasks"] = list(eval_tasks)
    for version in versions:
        start = time.perf_counter()
        model = pretrain_ml_world_model(fit_tasks, version=version)
        fit_seconds = time.perf_counter() - start
        print(f"{version}: fitted on {len(fit_tasks)} tasks in {fit_seconds:.1f} s", flush=True)
        row = {"fit_seconds": round(fit_seconds, 1)}
        for policy in POLICIES:
            row[policy] = {
                k: within_task_metrics(model, pairs, k, policy, repeats, seed=k)
                for k in ((0, 1, 2, 4, 8) if policy == "uniform" else (1, 2, 4, 8))
            }
        model.reset_task()
        row["programs_per_second"] = program_throughput(model, sorted(set(pairs[0])))
        row["load_average"] = os.getloadavg()
        print(f"{version} programs/s", row["programs_per_second"], "load", os.getloadavg())
        results[version] = row
        (out / "anchors.partial.json").write_text(json.dumps(results, indent=2))
    return results


def committed_throughput(versions: list[str]) -> dict:
    """:func:`program_throughput` of the committed ML world models, one after the other."""
    from wmrl_env.world_models.programs.ml_default import load_ml_world_model, pretraining_tasks

    contexts = [get_description(task) for task in pretraining_tasks("heldout")]
    results = {}
    for version in versions:
        results[version] = program_throughput(load_ml_world_model(version), contexts)
        results[version]["load_average"] = os.getloadavg()
        print(version, results[version], flush=True)
    return results


def get_description(task_id: str) -> str:
    from wmrl_env.envs.ml_tasks import get_task

    return get_task(task_id).description


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("throughput", "heldout", "anchors", "programs"))
    parser.add_argument("--out", default="runs/bench_wm")
    parser.add_argument("--repeats", type=int, default=10, help="anchors: draws per task")
    parser.add_argument(
        "--fit-split",
        default="wm,train",
        help="anchors: pretrain on these splits' table rows (default wm,train)",
    )
    parser.add_argument("--versions", default="v2,v3", help="anchors: world models to compare")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.what == "anchors":
        results = anchors(out, args.versions.split(","), args.repeats, args.fit_split)
    elif args.what == "programs":
        results = committed_throughput(args.versions.split(","))
    else:
        results = throughput(out) if args.what == "throughput" else heldout(out)
    record = {"machine": platform.platform(), "cpus": os.cpu_count(), "results": results}
    (out / f"{args.what}.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
