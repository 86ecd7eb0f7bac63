"""The user module of the verl tests, loaded by verl itself through
``reward.reward_manager.source=importlib`` in every reward worker and in the trainer process.

A real program scores each anchor sample in the local sandbox (how close the response's
length is to the row's target; a response containing "crash" makes the program fail); the
world model is a neighbour stand-in with a known bias (it never sees the target), and a
response containing "?" gets an invalid (NaN) prediction. A response containing "crash!" is
a known failure (``is_known_failure``): scored 0 without running.
"""

from __future__ import annotations

import numpy as np

from wmrl_env.fusion import RewardFusion
from wmrl_env.integrations.verl import WMRLRewardManager, register_estimator
from wmrl_env.sandboxes import Job, JsonScore, LocalSandbox

SCORE = JsonScore("score.json")
ANCHOR_FRACTION = 0.5
SEED = 3
FUSION_KWARGS = dict(method="wmrl", min_pairs=2, seed=0)


def true_score(response: str, target: int) -> float:
    return max(0.0, 1.0 - abs(len(response) - target) / 20)


def wm_score(response: str) -> float:
    return np.nan if "?" in response else 0.2 + 0.03 * len(response)


class LengthWorldModel:
    def predict(self, contexts, artifacts):
        return np.array([wm_score(a) for a in artifacts])


class LengthReward(WMRLRewardManager):
    anchor_fraction = ANCHOR_FRACTION
    seed = SEED

    def build_world_model(self):
        return LengthWorldModel()

    def build_executor(self):
        return LocalSandbox(timeout_s=30, memory_mb=512, max_workers=2)

    def to_job(self, prompt, response, row):
        target = int(row["extra_info"]["target"])
        crash = "raise SystemExit(3)\n" if "crash" in response else ""
        program = (
            "import json\n"
            f"{crash}response = {response!r}\n"
            f"score = max(0.0, 1.0 - abs(len(response) - {target}) / 20)\n"
            "json.dump({'score': score}, open('score.json', 'w'))\n"
        )
        return Job(program, output_files=SCORE.files, scorer=SCORE, timeout_s=30)

    def is_known_failure(self, artifact, row):
        return "crash!" in artifact


ESTIMATOR = register_estimator("wmrl_test", RewardFusion(**FUSION_KWARGS))
