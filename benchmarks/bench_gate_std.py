"""Does the world model's std help the gate? Coverage, power and reward quality, by simulation.

The gate's weight is now the unweighted slope's bound whatever the std says (its never-worse
range is that of the unweighted slope; docs/fusion.md), so the ``wls`` and ``ignore`` arms
below give the same weights and rewards; the script shows that, and the weighted slope the
gate still reports (``gate.weighted_estimate``).

Two parts, each comparing the gate's unweighted slope (``gate_std="ignore"``) with its
weighted least squares (``"wls"``: pairs weighed by ``(median sigma^2 / sigma^2) ** beta``,
``beta`` learnt from earlier anchors), with the world model's reported std informative (the
true noise std), constant, or random (independent of the errors):

1. **The gate alone** (:func:`~wmrl_env.fusion.synthetic.simulate_gate`, as in
   ``tests/fusion/test_gate.py``): 1,500 runs of 60 steps, 2 anchor groups of 8 per step,
   heterogeneous (lognormal) and heavy-tailed cluster scales, member noise stds
   lognormal(0, 0.8). Per step, the share of false openings for a useless world model
   (``lam* = 0``) and, with ``lam* = 0.3``, the mean weight and the share of steps above
   ``2 lam*`` (outside the never-worse range). The ``beta = 1`` rows fix the exponent.
2. **The fusion** (:class:`~wmrl_env.fusion.RewardFusion`, ``wmrl``, on
   :class:`~wmrl_env.fusion.synthetic.SyntheticWorld` batches of 64 groups of 8 with 10 %
   anchors, 40 steps) with heteroscedastic noise (``noise_spread`` 0.8) on the real outcome
   ("real noise": the std is that of ``r`` given ``s``) or on the world model's score ("wm
   noise": errors in the predictor). Per run: the mean weight ``lam``, the mean squared error
   of world-model groups' centred rewards against the true centred rewards, and the
   correlation of the advantages with the true centred rewards; means over runs with the
   paired difference ``wls - ignore`` and its standard error.

    python benchmarks/bench_gate_std.py [--runs 1500] [--fusion-runs 60] [--part gate fusion]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from wmrl_env.fusion import GroupIndex, RewardFusion
from wmrl_env.fusion.synthetic import SyntheticWorld, simulate_gate

STDS = ("informative", "constant", "random")


def gate_table(runs: int) -> None:
    print(
        "| scales | reported std | gate | false opening per step (max) | per run |"
        " mean weight, lam* = 0.3 | > 2 lam* | weighted slope |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for scales in ("lognormal", "heavy"):
        rows = [("none", None, "ignore")]
        rows += [(std, None, "wls") for std in STDS] + [
            (std, 1.0, "wls, beta = 1") for std in ("informative", "random")
        ]
        for std, beta, label in rows:
            null, _ = simulate_gate(runs, 60, 0.0, 1, scales, std, beta=beta)
            power, slope = simulate_gate(runs, 60, 0.3, 2, scales, std, beta=beta)
            opened = null > 0
            print(
                f"| {scales} | {std} | {label} | {opened.mean():.3f} "
                f"({opened.mean(0).max():.3f}) | {opened.any(1).mean():.2f} | "
                f"{power.mean():.3f} | {(power > 0.6).mean():.3f} | {np.nanmean(slope):.3f} |",
                flush=True,
            )


def fusion_run(world: SyntheticWorld, std: str, gate_std: str, seed: int, steps: int):
    rng = np.random.default_rng(seed)
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.1, seed=seed, gate_std=gate_std)
    weights, errors, correlations = [], [], []
    for step in range(steps):
        batch = world.sample(rng, step)
        reported = {
            "informative": batch.wm_std,
            "constant": np.ones(batch.wm_std.size),
            "random": rng.lognormal(0.0, world.noise_spread, batch.wm_std.size),
        }[std]
        anchors = fusion.select_anchors(batch.group_ids)
        real = np.where(anchors, batch.real_scores, np.nan)
        out = fusion.step(batch.group_ids, batch.wm_scores, real, wm_std=reported)
        groups = GroupIndex.from_ids(batch.group_ids)
        truth = groups.centre(batch.true_rewards)
        wm_group = ~out.is_anchor
        weights.append(out.metrics["wm_weight"])
        errors.append(np.mean((groups.centre(out.rewards)[wm_group] - truth[wm_group]) ** 2))
        correlations.append(np.corrcoef(out.advantages, truth)[0, 1])
    return np.mean(weights), np.mean(errors), np.mean(correlations)


def fusion_table(runs: int, steps: int) -> None:
    worlds = {
        "real noise": SyntheticWorld(real_noise=0.15, wm_noise=0.05, noise_spread=0.8),
        "wm noise": SyntheticWorld(real_noise=0.05, wm_noise=0.15, noise_spread=0.8),
    }
    print(
        "| noise on | reported std | mean lam ignore / wls | reward MSE ignore / wls "
        "(diff ± s.e.) | advantage corr. ignore / wls (diff ± s.e.) |"
    )
    print("|---|---|---|---|---|")
    for name, world in worlds.items():
        for std in STDS:
            a = np.array([fusion_run(world, std, "ignore", s, steps) for s in range(runs)])
            b = np.array([fusion_run(world, std, "wls", s, steps) for s in range(runs)])
            diff = b - a
            se = diff.std(axis=0, ddof=1) / np.sqrt(runs)
            mean_a, mean_b, mean_d = a.mean(0), b.mean(0), diff.mean(0)
            print(
                f"| {name} | {std} | {mean_a[0]:.3f} / {mean_b[0]:.3f} | "
                f"{mean_a[1]:.5f} / {mean_b[1]:.5f} ({mean_d[1]:+.5f} ± {se[1]:.5f}) | "
                f"{mean_a[2]:.4f} / {mean_b[2]:.4f} ({mean_d[2]:+.4f} ± {se[2]:.4f}) |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--fusion-runs", type=int, default=60)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--part", nargs="+", default=["gate", "fusion"])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    if "gate" in args.part:
        gate_table(args.runs)
    if "fusion" in args.part:
        fusion_table(args.fusion_runs, args.steps)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
