"""Can the embedding regressor learn task-specific program preferences? (the first bench's miss)

The default head is ridge on ``[task embedding, program embedding]``: additive, so every task
of a kind ranks the programs alike. This script compares it with ridge on the same features
plus their interaction ``task * program * scale``, fitted on the train tasks' table rows:

* zero-shot: on the held-out tasks (never seen);
* with anchors: after adding a random 30 % of the held-out rows, on the other 70 %.

It reports Spearman over all rows, the mean within-task Spearman (the order GRPO uses) and
the MSE.

    python benchmarks/bench_interaction_features.py [--scales 1 4 19.6]
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_world_models import table_pairs
from scipy.stats import spearmanr

from wmrl_env.world_models.embeddings.encoder import TextEncoder
from wmrl_env.world_models.embeddings.heads import make_head


def within_task_spearman(predicted: np.ndarray, real: np.ndarray, tasks: np.ndarray) -> float:
    return float(
        np.nanmean([spearmanr(predicted[tasks == t], real[tasks == t])[0] for t in set(tasks)])
    )


def report(name: str, predicted: np.ndarray, real: np.ndarray, tasks: np.ndarray) -> None:
    print(
        f"  {name:<14} spearman {spearmanr(predicted, real)[0]:.3f}  "
        f"within-task {within_task_spearman(predicted, real, tasks):.3f}  "
        f"mse {np.mean((predicted - real) ** 2):.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 4.0])
    args = parser.parse_args()
    train_c, train_a, train_y, _ = table_pairs("train")
    test_c, test_a, test_y, _ = table_pairs("heldout")
    encoder = TextEncoder()
    train_x = (encoder.encode(train_c), encoder.encode(train_a))
    test_x = (encoder.encode(test_c), encoder.encode(test_a))
    tasks = np.array(test_c)
    anchors = np.random.default_rng(0).random(len(test_y)) < 0.3

    variants = {"additive": lambda c, a: np.hstack([c, a])}
    for scale in args.scales:
        variants[f"interaction x{scale:g}"] = lambda c, a, k=scale: np.hstack([c, a, k * c * a])
    for name, features in variants.items():
        print(name)
        head = make_head("ridge").fit(features(*train_x), train_y)
        report("zero-shot", head.predict(features(*test_x)), test_y, tasks)
        seen = np.vstack([features(*train_x), features(*(x[anchors] for x in test_x))])
        head = make_head("ridge").fit(seen, np.concatenate([train_y, test_y[anchors]]))
        rest = features(*(x[~anchors] for x in test_x))
        report("+30 % anchors", head.predict(rest), test_y[~anchors], tasks[~anchors])


if __name__ == "__main__":
    main()
