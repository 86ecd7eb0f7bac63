"""Time ``RewardFusion.step`` on a large batch.

Default: 65,536 trajectories in groups of 8, 10 % anchor groups, an 8-step calibration
window, method "wmrl". The machine may be shared: alongside the step time it reports the
step's CPU time (``time.process_time``: less sensitive to other processes) and the time of
``np.sort`` on the same number of floats, measured in the same run, as a yardstick.

    python benchmarks/bench_fusion.py [--trajectories 65536] [--method wmrl] [--repeats 30]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from wmrl_env.fusion import RewardFusion
from wmrl_env.fusion.synthetic import SyntheticWorld


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=65_536)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--method", default="wmrl")
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    world = SyntheticWorld(
        num_groups=args.trajectories // args.group_size, group_size=args.group_size
    )
    rng = np.random.default_rng(0)
    fusion = RewardFusion(method=args.method, window=args.window, seed=0)
    step_ms, cpu_ms, sort_ms = [], [], []
    for step in range(args.window + args.repeats):  # the first `window` steps fill the window
        batch = world.sample(rng, step)
        anchors = fusion.select_anchors(batch.group_ids)
        real = np.where(anchors, batch.real_scores, np.nan)
        start, cpu_start = time.perf_counter(), time.process_time()
        out = fusion.step(batch.group_ids, batch.wm_scores, real)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        start = time.perf_counter()
        np.sort(batch.wm_scores)
        sorted_in = time.perf_counter() - start
        if step >= args.window:
            step_ms.append(1e3 * elapsed)
            cpu_ms.append(1e3 * cpu)
            sort_ms.append(1e3 * sorted_in)
    step_median, sort_median = float(np.median(step_ms)), float(np.median(sort_ms))
    print(
        f"RewardFusion.step method={args.method} N={args.trajectories} G={args.group_size} "
        f"anchors={out.metrics['n_anchor_groups']} groups, window pairs={out.metrics['n_pairs']}"
    )
    print(
        f"  median {step_median:.1f} ms  (p10 {np.percentile(step_ms, 10):.1f}, "
        f"p90 {np.percentile(step_ms, 90):.1f}); CPU time median {np.median(cpu_ms):.1f} ms"
    )
    print(
        f"  np.sort of N floats: median {sort_median:.2f} ms  -> step = "
        f"{step_median / sort_median:.1f} sorts"
    )


if __name__ == "__main__":
    main()
