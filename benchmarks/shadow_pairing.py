"""Is an anchor's closed shadow scored like a world-model member where real episodes end
before imagined ones? (docs/wrappers.md)

PPI's correction is unbiased only when an anchor's world-model score (its shadow) has the
distribution of a world-model member's score. Here a point mass always starts at 1, the
learner plays ``-0.5 x`` plus Gaussian noise (clipped to [-1, 1]), real episodes end when
``|x| < 0.1`` (most end before the limit), and a sluggish world model (``x' = x + a / 2``)
keeps its episodes going. Each round of 4 groups of 4 (anchor fraction 0.5) gives the mean
closed-shadow score of the anchors minus that of the world-model members; the script prints
the mean over rounds with its standard error (0 when the pairing is right).

    nice python benchmarks/shadow_pairing.py --rounds 800 --noise 0.5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from testing_env import closed_shadow_gaps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=800)
    parser.add_argument("--noise", type=float, default=0.5, help="the learner's noise std")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.rounds < 2 or args.noise < 0:
        parser.error("--rounds must be >= 2 and --noise >= 0")
    gaps, early = closed_shadow_gaps(args.rounds, args.noise, args.seed)
    se = gaps.std(ddof=1) / np.sqrt(gaps.size)
    print(
        f"rounds {args.rounds}, noise {args.noise}: real episodes ending before the limit "
        f"{early:.2f}; E[closed shadow - member] = {gaps.mean():+.4f} +- {se:.4f}"
    )


if __name__ == "__main__":
    main()
