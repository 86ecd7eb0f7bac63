"""Which success predictor ranks real on-policy episodes better: the classifier on the
imagined state, or the ensemble's termination head? (docs/benchmarks.md)

For each seed: the base policy and its demonstrations (as ``wmrl bench --domain robosuite``
makes them), one dynamics ensemble pretrained on the demonstrations with each predictor on
top, and ``--episodes`` real Lift episodes played by the policy's sampled chunks (GRPO's
rollouts) from starts 3,000,000+ (neither demonstration, training nor evaluation starts).
Each episode is imagined open-loop from its start with its own chunks, for as many chunks as
it really lasted (as the fusion's shadow of an anchor); its score is the sum of imagined
rewards. Prints the ROC AUC of each predictor's score against real success.

    python benchmarks/robot_success_predictors.py --seeds 0 1 --episodes 32
"""

from __future__ import annotations

import argparse

import numpy as np


def imagined_score(model, start: np.ndarray, chunks: np.ndarray) -> float:
    state, total = start[None].astype(np.float32), 0.0
    for chunk in chunks:
        step = model.predict_step(state, chunk[None])
        total += float(step.rewards[0])
        if step.terminations[0]:
            break
        state = step.next_observations
    return total


def main(argv: list[str] | None = None) -> None:
    import torch
    from sklearn.metrics import roc_auc_score

    from wmrl_env.bench.robotics import RobotBenchConfig
    from wmrl_env.bench.robotics.start import base_policy, make_task_env, prepare_seed

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--episodes", type=int, default=32)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for seed in args.seeds:
        config = RobotBenchConfig(arms=("real",))  # no AUC on demonstrations here
        start = prepare_seed(config, seed)
        models = {
            name: start.world_model(RobotBenchConfig(success_predictor=name))
            for name in ("classifier", "termination")
        }
        policy, _ = base_policy(config, seed)
        env = make_task_env(config.task, start.horizon, start.chunk_size)
        scores = {name: [] for name in models}
        successes = []
        for episode in range(args.episodes):
            observation, _ = env.reset(seed=3_000_000 + 1000 * seed + episode)
            first, chunks, done, success = observation, [], False, False
            while not done:
                chunk = policy.act(observation[None].astype(np.float32))[0][0]
                chunk = np.clip(chunk, env.action_space.low, env.action_space.high)
                observation, reward, terminated, truncated, _ = env.step(chunk)
                chunks.append(chunk)
                done, success = terminated or truncated, success or reward > 0
            successes.append(success)
            for name, model in models.items():
                scores[name].append(imagined_score(model, first, np.asarray(chunks)))
        env.close()
        labels = np.asarray(successes)
        line = [f"seed {seed}: {labels.sum()} of {len(labels)} real episodes succeeded"]
        for name, values in scores.items():
            auc = roc_auc_score(labels, values) if 0 < labels.sum() < len(labels) else np.nan
            line.append(f"{name} AUC {auc:.3f}")
        print("; ".join(line), flush=True)


if __name__ == "__main__":
    main()
