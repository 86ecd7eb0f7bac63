"""Quickstart: a text task answered by a world model, with a few groups checked for real.

The task: the observation is an addition ("12+30"), the action the answer as text. The real
env checks the answer (imagine a sandbox running a test suite: the expensive part). The world
model guesses whether an answer is right from cheap cues. ``WorldModelVectorEnv`` gives every
member of a group the same problem, scores every answer with one world-model call, executes
only the anchor groups and returns fused rewards and GRPO advantages.

    python examples/wrapper_quickstart.py
"""

from __future__ import annotations

import string

import gymnasium as gym
import numpy as np

from wmrl_env import RewardFusion, WorldModelVectorEnv

CHARSET = string.digits + "+"


class AdditionEnv(gym.Env):
    """Observation: ``"a+b"``; action: the sum as text; reward 1 when right, else 0."""

    observation_space = gym.spaces.Text(max_length=8, charset=CHARSET)
    action_space = gym.spaces.Text(max_length=8, charset=CHARSET)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.a, self.b = (int(x) for x in self.np_random.integers(10, 50, size=2))
        return f"{self.a}+{self.b}", {}

    def step(self, answer: str):
        correct = answer == str(self.a + self.b)
        return f"{self.a}+{self.b}", float(correct), True, False, {}


class CheapGuess:
    """A world model: right last digit and right length look right (often, not always)."""

    def predict(self, problems: list[str], answers: list[str]) -> np.ndarray:
        scores = []
        for problem, answer in zip(problems, answers, strict=True):
            a, b = (int(x) for x in problem.split("+"))
            expected = str(a + b)
            score = (
                0.1 + 0.5 * (answer[-1:] == expected[-1:]) + 0.3 * (len(answer) == len(expected))
            )
            scores.append(score)
        return np.array(scores)


def propose(problem: str, rng: np.random.Generator) -> str:
    """A stand-in policy: the right sum, or an answer that is off by 1 or 10."""
    a, b = (int(x) for x in problem.split("+"))
    return str(a + b + int(rng.choice([0, 0, 1, -1, 10])))


def main() -> None:
    envs = WorldModelVectorEnv(
        AdditionEnv,
        CheapGuess(),
        num_groups=8,
        group_size=4,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
    )
    rng = np.random.default_rng(0)
    for round_ in range(3):  # a few rounds, so the fusion has anchor pairs to calibrate with
        problems, info = envs.reset(seed=round_)
        answers = tuple(propose(problem, rng) for problem in problems)
        problems, rewards, _, _, info = envs.step(answers)
    anchor_group = int(info["group_id"][info["is_anchor"]][0])
    model_group = int(info["group_id"][~info["is_anchor"]][0])
    print(f"executed for real: {info['is_anchor'].sum()} of {envs.num_envs} answers")
    print("problem  answer  anchor  wm_score  calibrated  real  reward  advantage  status")
    for i in np.flatnonzero(np.isin(info["group_id"], [anchor_group, model_group])):
        print(
            f"{problems[i]:>7}  {answers[i]:>6}  {info['is_anchor'][i]!s:>6}  "
            f"{info['wm_score'][i]:8.2f}  {info['calibrated_score'][i]:10.2f}  "
            f"{info['real_score'][i]:4.1f}  {rewards[i]:6.2f}  {info['advantage'][i]:9.2f}  "
            f"{info['exec_status'][i]}"
        )
    print("kappa", round(float(info["batch"]["kappa"][0]), 3))
    envs.close()


if __name__ == "__main__":
    main()
