"""GRPO post-training of a behaviour-cloned chunk policy on robosuite Lift with the dense
progress reward: every episode runs in the simulator and pays half its sparse success, half
the calibrated progress a progress model predicts; the model is checked on every round's
episodes before it sees them, then updated on them (co-evolution).

Per round it prints the real episodes' success rate, the progress model's on-policy ROC AUC
of success from predicted final progress (pooled and within starts: what GRPO's advantages
compare) and the calibration in use; at the end the greedy policy's success on held-out
starts before and after.

    python examples/vla_dense_grpo.py --rounds 4 --groups 4 --group-size 4 --eval-starts 12

Needs the ``robosuite`` and ``torch`` extras.
"""

from __future__ import annotations

import argparse
import json

HELD_OUT = 900_000  # start seeds apart from the demonstrations' and from training


def main(argv: list[str] | None = None) -> dict:
    import numpy as np
    import torch

    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.grpo import GRPOConfig, train
    from wmrl_env.integrations.vla import dense_progress_envs
    from wmrl_env.robotics import RECIPES, make_base_policy, success_on_seeds

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--eval-starts", type=int, default=12)
    parser.add_argument("--dense-weight", type=float, default=0.5)
    parser.add_argument("--cache-dir", default="runs/base_policy")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    policy, demos = make_base_policy("Lift", seed=args.seed, cache_dir=args.cache_dir)
    horizon, chunk = int(demos.metadata["horizon"]), RECIPES["Lift"].chunk_size

    def lift():
        return RobosuiteEnv("Lift", horizon=horizon, reward_shaping=False,
                            terminate_on_success=True)  # fmt: skip

    evaluation = lift()  # success_on_seeds plays it chunk by chunk
    starts = range(HELD_OUT, HELD_OUT + args.eval_starts)
    before = float(success_on_seeds(policy, evaluation, starts).mean())
    envs = dense_progress_envs(
        lift, demos, args.groups, args.group_size, chunk_size=chunk,
        dense_weight=args.dense_weight, seed=args.seed, max_episode_steps=-(-horizon // chunk),
    )  # fmt: skip

    def report(row: dict) -> None:
        check = row["fusion"]["progress_check"] or {}
        print(json.dumps({
            "round": row["iteration"] + 1,
            "real_success": check.get("success_rate"),
            "progress_auc": check.get("auc"),
            "progress_within_start_auc": check.get("within_group_auc"),
            "calibration": check.get("calibration"),
        }, default=float), flush=True)  # fmt: skip

    try:
        # the robot bench's settings: a small Adam step keeps the cloned policy's ratios sane
        grpo = GRPOConfig(iterations=args.rounds, learning_rate=5e-5, update_epochs=4,
                          optimizer="adam", seed=args.seed)  # fmt: skip
        train(envs, policy, grpo, log=report)
    finally:
        envs.close()
    after = float(success_on_seeds(policy, evaluation, starts).mean())
    evaluation.close()
    result = {"held_out_success_before": before, "held_out_success_after": after,
              "held_out_starts": args.eval_starts}  # fmt: skip
    print(json.dumps(result))
    return {**result, "finite": bool(np.isfinite([before, after]).all())}


if __name__ == "__main__":
    main()
