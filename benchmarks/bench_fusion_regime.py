"""Does the world model pay, and is it never worse than ignoring it? A fast regime simulation.

The paper's regime in miniature (from ``/work/shared/sim/regime_sim.py``): 150 train and 50
held-out synthetic tasks, 72 programs, a task-conditioned softmax policy trained by GRPO
(Adam) with 20 groups of 8 per round, 2 of them anchors, 60 rounds. True score
``r(t, p) = sigmoid(u_t' W z_p + c_p)``; the world model is the same formula with
perturbed parameters (``err``) plus noise, or uniform random scores (``random``). Arms:

* ``anchors``: GRPO on the 2 anchor groups alone (same real budget, no world model);
* ``wmrl``, ``ppi``: :class:`~wmrl_env.fusion.RewardFusion` on all 20 groups, 2 of them real.

Printed: the final held-out score (normalised by the best program per task) per world-model
quality, mean over seeds with a 95 % interval, and the real executions per run; for the
gated arms also ``[λ mean weight / λ̂ mean pooled slope]`` over every round of every run.

    python benchmarks/bench_fusion_regime.py [--seeds 32] [--rounds 60] [--arms anchors wmrl ppi]
        [--wm-gate evidence|off]

``--wm-gate off`` runs the fusion without the evidence gate (wmrl: lam = 1; ppi: the
per-step power-tuned lam), for comparison. ``--noise-spread S`` makes the world model's
noise heteroscedastic (each (task, program)'s std times lognormal(0, S)); ``--wm-std`` is the
predictive std it reports to the gate (``none``, ``informative``, ``random``) and
``--gate-std`` whether the gate weighs pairs by it (``wls``) or not (``ignore``).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from wmrl_env.fusion.regime import QUALITIES, Regime, make_world, train, within_task_spearman


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--wm-gate", default="evidence", choices=["evidence", "off"])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--arms", nargs="+", default=["anchors", "wmrl", "ppi"])
    parser.add_argument("--qualities", nargs="+", default=list(QUALITIES))
    parser.add_argument("--noise-spread", type=float, default=0.0)
    parser.add_argument("--wm-std", default="none", choices=["none", "informative", "random"])
    parser.add_argument("--gate-std", default="wls", choices=["wls", "ignore"])
    args = parser.parse_args()
    regime = Regime(rounds=args.rounds, noise_spread=args.noise_spread)
    options = {"wm_gate": args.wm_gate, "gate_std": args.gate_std}
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    print(f"| world model | within-task Spearman | {' | '.join(args.arms)} |")
    print("|---" * (len(args.arms) + 2) + "|")
    for quality in args.qualities:
        cells = []
        for arm in args.arms:
            if arm == "anchors" and quality != args.qualities[0]:
                cells.append("″")  # anchors ignore the world model: same as the first row
                continue
            traces: list[list[dict]] = [[] for _ in range(args.seeds)]
            results = [
                train(regime, arm, quality, seed, traces[seed], args.wm_std, **options)
                for seed in range(args.seeds)
            ]
            scores = np.array([score for score, _ in results])
            half = 1.96 * scores.std(ddof=1) / np.sqrt(scores.size)
            cell = f"{scores.mean():.3f} ± {half:.3f} ({results[0][1]})"
            if arm in ("wmrl", "ppi") and args.wm_gate == "evidence":
                cell += gate_summary(traces)
            cells.append(cell)
        rho = within_task_spearman(make_world(regime, quality, 0))
        print(f"| {quality} | {rho:.2f} | {' | '.join(cells)} |", flush=True)
    print(f"({args.seeds} seeds, {args.rounds} rounds, {time.perf_counter() - start:.0f} s)")


def gate_summary(traces: list[list[dict]]) -> str:
    """The gate's mean weight over the run and the mean ungated pooled slope behind it."""
    weight = np.nanmean([m["wm_weight"] for trace in traces for m in trace])
    slope = np.nanmean([m["wm_weight_estimate"] for trace in traces for m in trace])
    return f" [λ {weight:.2f} / λ̂ {slope:.2f}]"


if __name__ == "__main__":
    main()
