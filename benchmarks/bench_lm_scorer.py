"""The LM scorer's online learning and calibrated std, on a tiny random Qwen2 (CPU, 1 thread).

    python benchmarks/bench_lm_scorer.py [--seeds 0,1,2] [--rounds 1,2,4,8,16] [--out runs/bench_lm]
        [--parts cost,learning,forgetting] [--parts mltasks --ml-tasks 4 --repeats 2]

A synthetic task whose truth is learnable (``tiny_lm.keyword_task``: the real score is the
level of the function a two-line program calls, 0.2-0.8, plus noise of sd 0.08). For each
model seed, a fresh ``CausalLMScorer`` gets rounds of 16 fresh anchors through ``update()``
(a bounded LoRA step each: 4 AdamW steps of 16 pairs, half replayed) and is scored on 400 fresh
items after 0, 1, 2, 4, 8 and 16 rounds:

* ``learning``: Spearman and MSE against the real scores, with the reference lines: the
  oracle (the noise-free levels), a constant at the mean, the zero-shot model;
* ``forgetting``: 8 rounds on two of the four functions, then 8 on the other two; MSE on
  the first two before and after the second phase, with the default replay (half of each
  batch drawn from past anchors) and without;
* ``mltasks`` (not in the default ``--parts``): the same scorer on the first ``--ml-tasks``
  held-out tasks of the ML suite, with ``bench_world_models.py anchors``' protocol and
  metrics (``within_task_metrics``: within-task Spearman, top-1 regret and coverage on the
  task's programs that were not anchors, zero-shot and after 1, 2, 4, 8 anchor groups of 8,
  uniform and on-policy), restarted from the base weights for every draw;
* ``cost``: seconds per ``update()`` (and per optimizer step) for 8 / 16 / 32 / 64 anchors, the
  LoRA parameters it trains, seconds per 100 predictions;
* ``coverage`` of +-1 / +-1.96 std on the test items: the raw score-token spread, the std
  calibrated on the anchor stream (each anchor's residual before it is learned, what
  ``update()`` does), and split conformal (``calibrate()`` on 400 held-out items, then 400
  fresh test items).

The tiny model knows nothing of code: the figures measure the machinery (how fast a LoRA step
turns anchors into a ranking, what it costs, whether the std covers), not a real LM's skill.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections import deque
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TEMPLATE = "{context}\n{artifact}\nScore: "
PER_ROUND = 16
PARTS = ("cost", "learning", "forgetting")
N_TEST = N_CALIBRATION = 400


def make_scorer(model_dir: str, learning_rate: float, **online):
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
    from wmrl_env.world_models.lm.online_lora import OnlineLoraConfig
    from wmrl_env.world_models.lm.prompting import ScorePrompt

    return CausalLMScorer(
        model_dir,
        prompt=ScorePrompt(template=TEMPLATE),
        min_score_mass=0.0,
        batch_size=32,
        online=OnlineLoraConfig(learning_rate=learning_rate, **online),
    )


def coverage(real: np.ndarray, scores: np.ndarray, std: np.ndarray) -> list[float]:
    return [round(float(np.mean(np.abs(real - scores) <= k * std)), 3) for k in (1.0, 1.96)]


def learning_curve(model_dir: str, seed: int, rounds: list[int], learning_rate: float) -> dict:
    """Accuracy and coverage after each number of rounds, for one model seed."""
    from wmrl_env.world_models.conformal_std import ConformalStd
    from wmrl_env.world_models.lm.tiny_lm import keyword_task

    rng = np.random.default_rng(10_000 + seed)
    contexts, artifacts, real, level = keyword_task(N_TEST, rng)
    calibration_set = keyword_task(N_CALIBRATION, rng)[:3]
    scorer = make_scorer(model_dir, learning_rate, seed=seed)
    rows, done = {}, 0
    for k in [0, *rounds]:
        for _ in range(k - done):
            scorer.update(*keyword_task(PER_ROUND, rng)[:3])
        done = k
        raw = scorer.predict_raw(contexts, artifacts)
        stream = scorer.predict(contexts, artifacts)
        kept = scorer.std_calibration, scorer.calibration_set
        scorer.std_calibration = ConformalStd(window=N_CALIBRATION, floors=kept[0].floors)
        scorer.calibration_set = deque(maxlen=N_CALIBRATION)
        scorer.calibrate(*calibration_set)
        split = scorer.predict(contexts, artifacts)
        scorer.std_calibration, scorer.calibration_set = kept
        rows[k] = {
            "spearman": round(float(spearmanr(raw.scores, real).statistic), 3),
            "mse": round(float(np.mean((raw.scores - real) ** 2)), 4),
            "coverage_raw": coverage(real, raw.scores, raw.std),
            "coverage_stream": coverage(real, stream.scores, stream.std),
            "coverage_split": coverage(real, split.scores, split.std),
        }
        print(f"seed {seed} rounds {k}:", rows[k], flush=True)
    references = {
        "oracle_spearman": round(float(spearmanr(level, real).statistic), 3),
        "oracle_mse": round(float(np.mean((level - real) ** 2)), 4),
        "constant_mse": round(float(np.var(real)), 4),
    }
    return {"rounds": rows, "references": references}


def forgetting(model_dir: str, seed: int, learning_rate: float, rounds: int = 8) -> dict:
    """MSE on the first phase's functions after it and after a second phase on the others,
    with and without replay."""
    from wmrl_env.world_models.lm.tiny_lm import keyword_task

    first, second = ("sorted", "print"), ("reversed", "max")
    out = {}
    for replay in (0.5, 0.0):
        rng = np.random.default_rng(20_000 + seed)
        contexts, artifacts, real, _ = keyword_task(N_TEST, rng, keywords=first)
        scorer = make_scorer(model_dir, learning_rate, seed=seed, replay_fraction=replay)
        row = {}
        for phase, keywords in (("after_first", first), ("after_second", second)):
            for _ in range(rounds):
                scorer.update(*keyword_task(PER_ROUND, rng, keywords=keywords)[:3])
            p = scorer.predict(contexts, artifacts)
            row[phase] = round(float(np.mean((p.scores - real) ** 2)), 4)
        out[f"replay_{replay}"] = row
    print(f"seed {seed} forgetting (MSE on the first phase's items):", out, flush=True)
    return out


class PerTaskScorer:
    """The scorer restarted from its base weights whenever the anchors protocol resets a task."""

    def __init__(self, model_dir: str, learning_rate: float) -> None:
        self.model_dir, self.learning_rate = model_dir, learning_rate
        self.reset_task()

    def reset_task(self, context: object = None) -> None:
        self.scorer = make_scorer(self.model_dir, self.learning_rate)

    def predict(self, contexts, artifacts):
        return self.scorer.predict(contexts, artifacts)

    def update(self, contexts, artifacts, real) -> None:
        self.scorer.update(contexts, artifacts, real)


def ml_tasks(model_dir: str, n_tasks: int, repeats: int, learning_rate: float) -> dict:
    """bench_world_models.py's anchors protocol on the first ``n_tasks`` held-out tasks."""
    from bench_world_models import POLICIES, within_task_metrics

    from wmrl_env.world_models.programs.ml_default import pretraining_tasks, table_training_pairs

    tasks = pretraining_tasks("heldout")[:n_tasks]
    pairs = table_training_pairs(tasks)
    model = PerTaskScorer(model_dir, learning_rate)
    row: dict = {"tasks": list(tasks), "repeats": repeats}
    for policy in POLICIES:
        row[policy] = {
            k: within_task_metrics(model, pairs, k, policy, repeats, seed=k)
            for k in ((0, 1, 2, 4, 8) if policy == "uniform" else (1, 2, 4, 8))
        }
    return row


def update_cost(model_dir: str, learning_rate: float) -> dict:
    """Seconds per update() for several anchor counts (after a warm-up update)."""
    from wmrl_env.world_models.lm.tiny_lm import keyword_task

    rng = np.random.default_rng(0)
    scorer = make_scorer(model_dir, learning_rate)
    scorer.update(*keyword_task(PER_ROUND, rng)[:3])  # adds the adapters, warms up
    out = {}
    for n in (8, 16, 32, 64):
        batch = keyword_task(n, rng)[:3]
        start = time.perf_counter()
        report = scorer.update(*batch)
        seconds = time.perf_counter() - start
        out[n] = {
            "update_seconds": round(seconds, 3),
            "step_seconds": round(report.seconds / report.steps, 3),
            "steps": report.steps,
            "trainable_parameters": report.trainable_parameters,
        }
        print(f"update of {n} anchors:", out[n], flush=True)
    contexts, artifacts = keyword_task(400, rng)[:2]
    start = time.perf_counter()
    scorer.predict(contexts, artifacts)
    out["predict_seconds_per_100"] = round((time.perf_counter() - start) / 4, 3)
    total = sum(p.numel() for p in scorer.model.parameters())
    out["model_parameters"] = int(total)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="model seeds (also the data's)")
    parser.add_argument("--rounds", default="1,2,4,8,16", help="update rounds to score after")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="measurements: cost,learning,forgetting,mltasks"
    )
    parser.add_argument("--ml-tasks", type=int, default=4, help="mltasks: held-out tasks")
    parser.add_argument("--repeats", type=int, default=2, help="mltasks: anchor draws per task")
    parser.add_argument("--out", default="runs/bench_lm")
    args = parser.parse_args()
    import torch

    from wmrl_env.world_models.lm.tiny_lm import build_tiny_causal_lm

    torch.set_num_threads(1)  # on a shared machine more threads only contend
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
        "learning_rate": args.learning_rate,
    }
    rounds = [int(r) for r in args.rounds.split(",")]
    parts = args.parts.split(",")
    everything = set(parts) == set(PARTS)
    path = out / ("lm_scorer.json" if everything else f"lm_scorer_{'+'.join(parts)}.json")
    with tempfile.TemporaryDirectory(prefix="wmrl-bench-lm-") as tmp:
        model_dirs = {}
        for seed in (int(s) for s in args.seeds.split(",")):
            model_dirs[seed] = str(build_tiny_causal_lm(Path(tmp) / f"m{seed}", seed=seed))
        if "cost" in parts:
            record["cost"] = update_cost(model_dirs[min(model_dirs)], args.learning_rate)
            record["load_average_cost"] = os.getloadavg()
        if "mltasks" in parts:
            model_dir = model_dirs[min(model_dirs)]
            record["mltasks"] = ml_tasks(model_dir, args.ml_tasks, args.repeats, args.learning_rate)
            path.write_text(json.dumps(record, indent=2))
        for part in ("learning", "forgetting"):
            if part not in parts:
                continue
            record[part] = {}
            for seed, model_dir in model_dirs.items():
                if part == "learning":
                    result = learning_curve(model_dir, seed, rounds, args.learning_rate)
                else:
                    result = forgetting(model_dir, seed, args.learning_rate)
                record[part][seed] = result
                path.write_text(json.dumps(record, indent=2))
    record["load_average_end"] = os.getloadavg()
    path.write_text(json.dumps(record, indent=2))
    print("wrote", path)


if __name__ == "__main__":
    main()
