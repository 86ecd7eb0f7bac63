"""Synthetic (context, artifact, score) logs for the world-model tests: small code tasks whose
correct, wrong and 'risky' solutions score differently, with known noise levels."""

from __future__ import annotations

import numpy as np

TASKS = {
    "sort": "Sort the list of integers in ascending order.",
    "squares": "Return the sum of the squares of the numbers.",
    "vowels": "Count the vowels in the string.",
    "reverse": "Reverse the order of the words in a sentence.",
    "maximum": "Return the largest element of the list.",
    "unique": "Return the distinct elements of the list, keeping their order.",
}
GOOD = {
    "sort": "def solve(x):\n    return sorted(x)",
    "squares": "def solve(x):\n    return sum(v * v for v in x)",
    "vowels": "def solve(s):\n    return sum(c in 'aeiou' for c in s.lower())",
    "reverse": "def solve(s):\n    return ' '.join(s.split()[::-1])",
    "maximum": "def solve(x):\n    return max(x)",
    "unique": "def solve(x):\n    return list(dict.fromkeys(x))",
}
BAD = (
    "def solve(x):\n    return x",
    "def solve(x):\n    pass",
    "def solve(x):\n    raise NotImplementedError",
    "def solve(x):\n    return None  # TODO",
)
RISKY = "def solve(x):\n    import random\n    return x if random.random() < 0.5 else None"


def synthetic_log(n: int, seed: int, tasks=tuple(TASKS)):
    """(contexts, artifacts, scores, task ids): correct programs score ~0.9 (noise 0.05),
    wrong ones ~0.1 (noise 0.05), 'risky' ones ~0.5 with large noise (0.3).

    Artifacts repeat (11 distinct programs), as they do across a GRPO run, so the encoder's
    cache keeps these tests fast; the noise makes repeated artifacts score differently."""
    rng = np.random.default_rng(seed)
    contexts, artifacts, scores, groups = [], [], [], []
    for _ in range(n):
        task = tasks[rng.integers(len(tasks))]
        kind = rng.choice(3, p=[0.4, 0.4, 0.2])
        if kind == 0:
            artifact, mean, noise = GOOD[task], 0.9, 0.05
        elif kind == 1:
            artifact, mean, noise = BAD[rng.integers(len(BAD))], 0.1, 0.05
        else:
            artifact, mean, noise = RISKY, 0.5, 0.3
        contexts.append(TASKS[task])
        artifacts.append(artifact)
        scores.append(float(np.clip(mean + noise * rng.normal(), 0.0, 1.0)))
        groups.append(task)
    return contexts, artifacts, np.array(scores), groups
