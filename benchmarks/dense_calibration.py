"""Which calibration of a dense progress reward helps GRPO: a toy with a known truth.

A Gaussian policy ``a ~ N(theta + c_g, 1)`` (``c_g`` the start of group ``g``) succeeds when
``a > tau``; its exact success rate is ``Phi((theta - tau) / sqrt(1 + 0.5**2))``. Every round
plays ``groups x size`` episodes (the robot bench's 4 x 4) and moves ``theta`` along the GRPO
gradient ``mean(A * (a - theta - c_g))`` with the advantages of
:func:`wmrl_env.fusion.advantages.group_advantages`. The progress model sees
``sigmoid(2 (a - tau + 0.5))`` plus noise (informative: failures nearer success show more
progress) or a uniform draw (uninformative, the never-worse check). Arms:

* ``sparse``: the success alone;
* ``affine`` / ``isotonic``: half success, half the calibrated progress
  (:class:`~wmrl_env.robotics.progress_calibration.ProgressCalibration`, fitted on the rounds
  before, as the dense reward pays it during the episode);
* ``dense``: the raw progress alone.

Every arm of a seed sees the same draws (paired). Prints the final success per arm and the
paired differences with their Monte-Carlo standard errors::

    python benchmarks/dense_calibration.py --seeds 400
"""

from __future__ import annotations

import argparse
import math

import numpy as np

ARMS = ("sparse", "affine", "isotonic", "dense")
SPREAD = 0.5  # std of the groups' starts


def grpo_toy(
    arm: str,
    seed: int,
    informative: bool = True,
    rounds: int = 8,
    groups: int = 4,
    size: int = 4,
    learning_rate: float = 0.5,
    tau: float = 1.5,
    dense_weight: float = 0.5,
) -> tuple[float, int]:
    """``(final exact success rate, rounds in which the dense part moved the reward)``."""
    from wmrl_env.fusion.advantages import group_advantages
    from wmrl_env.fusion.groups import GroupIndex
    from wmrl_env.robotics.progress_calibration import ProgressCalibration

    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(groups), size)
    index = GroupIndex.from_ids(ids)
    calibration = ProgressCalibration(arm) if arm in ("affine", "isotonic") else None
    theta, opened = 0.0, 0
    for _ in range(rounds):
        starts = rng.normal(0.0, SPREAD, groups)[ids]
        noise = rng.normal(size=ids.size)
        seen = rng.normal(0.0, 0.05, ids.size)
        uniform = rng.uniform(size=ids.size)
        a = theta + starts + noise
        success = (a > tau).astype(float)
        made = 1.0 / (1.0 + np.exp(-2.0 * (a - tau + 0.5))) + seen if informative else uniform
        if arm == "sparse":
            rewards = success
        elif arm == "dense":
            rewards = made
        else:
            rewards = (1 - dense_weight) * success + dense_weight * calibration.transform(made)
            opened += int(calibration.gate_open and np.ptp(calibration.transform(made)) > 0)
            calibration.update(made, success, ids)
        advantages = group_advantages(rewards, index)
        theta += learning_rate * float(np.mean(advantages * noise))
    return 0.5 * (1 + math.erf((theta - tau) / math.sqrt(2 * (1 + SPREAD**2)))), opened


def compare(seeds: int, informative: bool) -> dict[str, np.ndarray]:
    """Final success per arm and seed (seeds ``0 .. seeds - 1``)."""
    return {arm: np.array([grpo_toy(arm, s, informative)[0] for s in range(seeds)]) for arm in ARMS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=400)
    args = parser.parse_args()
    for informative in (True, False):
        finals = compare(args.seeds, informative)
        kind = "informative" if informative else "uninformative (random)"
        start = grpo_toy("sparse", 0, rounds=0)[0]
        print(f"progress {kind}, {args.seeds} seeds, start success {start:.3f}")
        for arm, values in finals.items():
            diff = values - finals["sparse"]
            se = diff.std(ddof=1) / math.sqrt(diff.size)
            print(
                f"  {arm:9s} final {values.mean():.4f}  vs sparse {diff.mean():+.4f} (SE {se:.4f})"
            )


if __name__ == "__main__":
    main()
