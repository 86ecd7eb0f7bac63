"""Time ``RewardFusion.step`` on a large batch, early in a run and after many steps.

Default: 65,536 trajectories in groups of 8, 10 % anchor groups, an 8-step calibration
window, method "wmrl". The machine may be shared: alongside the step time it reports the
step's CPU time (``time.process_time``: less sensitive to other processes) and the time of
``np.sort`` on the same number of floats, measured in the same run, as a yardstick.

``--long-run STEPS`` runs one fusion for ``STEPS`` steps and compares the median step time
of the first ``--repeats`` steps with that of the last ``--repeats``: a step's cost must not
grow with the run (the gate pools every step's clusters, decayed).

    python benchmarks/bench_fusion.py [--trajectories 65536] [--method wmrl] [--repeats 30]
    python benchmarks/bench_fusion.py --long-run 1000 --repeats 10
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from wmrl_env.fusion import RewardFusion, RewardHackingWarning
from wmrl_env.fusion.synthetic import SyntheticWorld

POOL = 16  # distinct batches a long run cycles through (sampling 65,536 pairs is not free)


def timed_steps(args: argparse.Namespace, steps: int) -> tuple[list[float], ...]:
    """Per step: wall ms, CPU ms, ``np.sort`` wall and CPU ms, the gate's clusters after it."""
    world = SyntheticWorld(
        num_groups=args.trajectories // args.group_size, group_size=args.group_size
    )
    rng = np.random.default_rng(0)
    batches = [world.sample(rng, step) for step in range(min(steps, POOL))]
    fusion = RewardFusion(method=args.method, window=args.window, seed=0)
    step_ms, cpu_ms, sort_ms, sort_cpu_ms, clusters = [], [], [], [], []
    for step in range(steps):
        batch = batches[step % len(batches)]
        anchors = fusion.select_anchors(batch.group_ids)
        real = np.where(anchors, batch.real_scores, np.nan)
        start, cpu_start = time.perf_counter(), time.process_time()
        out = fusion.step(batch.group_ids, batch.wm_scores, real)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        start, cpu_start = time.perf_counter(), time.process_time()
        np.sort(batch.wm_scores)
        sort_ms.append(1e3 * (time.perf_counter() - start))
        sort_cpu_ms.append(1e3 * (time.process_time() - cpu_start))
        step_ms.append(1e3 * elapsed)
        cpu_ms.append(1e3 * cpu)
        clusters.append(out.metrics["gate_clusters"])
    return step_ms, cpu_ms, sort_ms, sort_cpu_ms, clusters


def summary(name: str, step_ms, cpu_ms, sort_ms, sort_cpu_ms) -> tuple[float, float]:
    """Print one stretch's medians; returns the step's median wall and CPU ms."""
    step, cpu = float(np.median(step_ms)), float(np.median(cpu_ms))
    sort, sort_cpu = float(np.median(sort_ms)), float(np.median(sort_cpu_ms))
    print(
        f"  {name}: median {step:.1f} ms (p10 {np.percentile(step_ms, 10):.1f}, "
        f"p90 {np.percentile(step_ms, 90):.1f}), CPU {cpu:.1f} ms; np.sort of N floats "
        f"{sort:.2f} ms, CPU {sort_cpu:.2f} ms -> step = {step / sort:.1f} sorts "
        f"({cpu / sort_cpu:.1f} in CPU time)"
    )
    return step, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=65_536)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--method", default="wmrl")
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--long-run", type=int, default=0, metavar="STEPS")
    args = parser.parse_args()
    # a long run cycles through a few batches: the monitor's trend is not the point here
    warnings.simplefilter("ignore", RewardHackingWarning)
    print(
        f"RewardFusion.step method={args.method} N={args.trajectories} G={args.group_size} "
        f"window={args.window}"
    )
    if not args.long_run:
        # the first `window` steps fill the calibration window
        timings = timed_steps(args, args.window + args.repeats)
        summary("window filled", *(t[args.window :] for t in timings[:4]))
        return
    if args.long_run < 2 * args.repeats:
        parser.error("--long-run must be at least twice --repeats")
    *timings, clusters = timed_steps(args, args.long_run)
    first = slice(0, args.repeats)
    last = slice(args.long_run - args.repeats, args.long_run)
    early = summary(f"steps 1-{args.repeats}", *(t[first] for t in timings))
    late = summary(f"steps {last.start + 1}-{args.long_run}", *(t[last] for t in timings))
    print(
        f"  last / first: {late[0] / early[0]:.2f} (wall), {late[1] / early[1]:.2f} (CPU); "
        f"gate clusters held at the end: {clusters[-1]}"
    )


if __name__ == "__main__":
    main()
