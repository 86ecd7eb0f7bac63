"""WorldModelReward inside a real trl.GRPOTrainer: a tiny Qwen2 policy trains 3 steps on CPU,
a tiny causal-LM world model scores every completion, anchor groups run for real in the local
sandbox, and the values TRL trains on are exactly the fusion's advantages."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from wmrl_env.fusion import RewardFusion
from wmrl_env.sandboxes import Job, JsonScore, LocalSandbox
from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
from wmrl_env.world_models.lm.tiny_lm import build_tiny_causal_lm

pytestmark = [pytest.mark.trl, pytest.mark.transformers, pytest.mark.slow]

SCORE = JsonScore("score.json")
PROMPTS = ["Write a digit:", "Count to three:", "Say hello:", "Name a color:"]


def length_job(prompt: str, completion: str, target: int) -> Job:
    """A real program: scores how close the completion's length is to the row's target."""
    program = (
        "import json\n"
        f"completion = {completion!r}\n"
        f"score = max(0.0, 1.0 - abs(len(completion) - {target}) / 20)\n"
        "print('executed', len(completion))\n"
        "json.dump({'score': score}, open('score.json', 'w'))\n"
    )
    return Job(program, output_files=SCORE.files, scorer=SCORE, timeout_s=30)


def recording_reward(*args, **kwargs):
    """A WorldModelReward that keeps every call's record (it keeps only the last itself)."""
    from wmrl_env.integrations.trl import WorldModelReward

    class RecordingReward(WorldModelReward):
        def __call__(self, prompts, completions, **call_kwargs):
            returned = super().__call__(prompts, completions, **call_kwargs)
            self.calls.append(self.last_call)
            return returned

    reward = RecordingReward(*args, **kwargs)
    reward.calls = []
    return reward


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    return str(build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm"), seed=0))


def grpo_config(tmp_path, **overrides):
    from trl import GRPOConfig

    options = dict(
        output_dir=str(tmp_path / "grpo"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        max_steps=3,
        learning_rate=1e-3,
        beta=0.0,
        scale_rewards="none",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        log_completions=False,
    )
    options.update(overrides)
    return GRPOConfig(**options)


def test_grpo_trains_three_steps_on_fused_advantages(tiny_lm, tmp_path) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from wmrl_env.integrations.trl import WMRLGRPOTrainer

    dataset = Dataset.from_dict({"prompt": PROMPTS * 2, "target": [3, 5, 7, 9] * 2})
    world_model = CausalLMScorer(tiny_lm, min_score_mass=0.0)
    sandbox = LocalSandbox(timeout_s=30, memory_mb=512)
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, min_pairs=2, seed=0)
    reward = recording_reward(world_model, sandbox, length_job, fusion=fusion)
    policy = AutoModelForCausalLM.from_pretrained(tiny_lm)
    before = {k: v.detach().clone() for k, v in policy.named_parameters()}
    trainer = WMRLGRPOTrainer(
        model=policy,
        reward=reward,
        args=grpo_config(tmp_path),
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(tiny_lm, padding_side="left"),
    )
    try:
        trainer.train()
    finally:
        sandbox.close()

    assert trainer.state.global_step == 3
    assert reward.num_generations == 4
    assert len(reward.calls) == 3
    executed = 0
    for call in reward.calls:
        assert call.group_ids.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
        # anchors are whole groups, at least one per call, and each one ran for real
        assert call.is_anchor.any()
        for g in np.unique(call.group_ids):
            assert len(set(call.is_anchor[call.group_ids == g])) == 1
        assert len(call.results) == int(call.is_anchor.sum())
        for result in call.results:
            assert result.ok, result.message
            assert result.stdout.startswith("executed") and result.exec_seconds > 0
        executed += len(call.results)
        np.testing.assert_array_equal(call.fusion.is_anchor, call.is_anchor)
        # the values returned to TRL are the fusion's advantages (None where execution failed)
        expected = [
            None if f else float(a)
            for a, f in zip(call.fusion.advantages, call.failed, strict=True)
        ]
        assert call.returned == expected
        anchors = call.is_anchor & ~call.failed
        np.testing.assert_allclose(call.fusion.rewards[anchors], call.real_scores[anchors])
    assert reward.n_executed == executed >= 3 * 4
    assert reward.n_scored == 3 * 8

    # TRL trained on exactly those values: its logged advantages are the last call's
    logged = list(trainer._logs["advantages"])[-8:]
    np.testing.assert_allclose(logged, reward.calls[-1].fusion.advantages, atol=1e-6)
    metrics = trainer.state.log_history[-2]
    assert "wmrl/kappa" in metrics and "wmrl/n_anchor_groups" in metrics
    changed = any(
        not np.allclose(before[k].numpy(), v.detach().numpy()) for k, v in policy.named_parameters()
    )
    assert changed, "three GRPO steps left every weight unchanged"


def test_invalid_predictions_force_their_group_to_execute(tiny_lm) -> None:
    from wmrl_env.integrations.trl import WorldModelReward

    # a world model so unsure that every answer is flagged: every group must run for real
    world_model = CausalLMScorer(tiny_lm, min_score_mass=0.99)
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.0, min_anchor_groups=0, seed=0)
    with LocalSandbox(timeout_s=30, memory_mb=512) as sandbox:
        reward = WorldModelReward(world_model, sandbox, length_job, fusion=fusion)
        values = reward(PROMPTS[:2] * 2, ["ab", "abc", "abcd", "abcde"], target=[3, 5, 3, 5])
    call = reward.last_call
    assert not call.prediction.valid.any()
    assert set(call.prediction.reasons) == {"low_score_mass"}
    assert call.is_anchor.all() and len(call.results) == 4
    assert all(v is not None and math.isfinite(v) for v in values)
    np.testing.assert_allclose(call.fusion.rewards, call.real_scores)


def crash_or_length_job(prompt: str, completion: str, target: int = 5) -> Job:
    """``length_job``, except that a completion containing "crash" makes the program exit 3."""
    job = length_job(prompt, completion, target)
    if "crash" in completion:
        job = Job("raise SystemExit(3)", output_files=SCORE.files, scorer=SCORE, timeout_s=30)
    return job


class BrokenExecutor:
    """An executor whose infrastructure fails on every job (the neighbour's failure mode)."""

    def run(self, jobs):
        from wmrl_env.executors.base import ExecResult, ExecStatus

        return [ExecResult(job.job_id, ExecStatus.ERROR, message="daemon gone") for job in jobs]


@pytest.mark.parametrize("method", ["real", "wmrl"])
def test_a_crashing_program_scores_the_failure_score_below_its_group(tiny_lm, method) -> None:
    from wmrl_env.integrations.trl import WorldModelReward

    world_model = CausalLMScorer(tiny_lm, min_score_mass=0.0)
    fusion = RewardFusion(method=method, anchor_fraction=1.0, seed=0)
    with LocalSandbox(timeout_s=30, memory_mb=512) as sandbox:
        reward = WorldModelReward(
            world_model, sandbox, crash_or_length_job, fusion=fusion, score_range=(0.0, 1.0)
        )
        values = reward(["p"] * 4, ["crash!", "abcd", "abcde", "abcdef"], target=[5] * 4)
    call = reward.last_call
    assert call.results[0].status.is_program_failure
    assert not call.failed.any()  # a program failure is an outcome, not missing data
    assert call.real_scores[0] == 0.0  # the failure score: the score range's minimum
    assert all(v is not None for v in values)
    assert values[0] < np.mean(values) and values[0] == min(values)


def test_only_an_infrastructure_failure_is_missing(tiny_lm) -> None:
    from wmrl_env.integrations.trl import WorldModelReward

    world_model = CausalLMScorer(tiny_lm, min_score_mass=0.0)
    fusion = RewardFusion(method="real", seed=0)
    reward = WorldModelReward(world_model, BrokenExecutor(), length_job, fusion=fusion)
    values = reward(["p", "p"], ["a", "b"], target=[3, 3])
    assert values == [None, None]
    assert reward.last_call.failed.all() and np.isnan(reward.last_call.real_scores).all()
    assert (reward.last_call.fusion.advantages == 0).all()


def test_update_world_model_is_on_by_default(tiny_lm) -> None:
    import inspect

    from wmrl_env.integrations.trl import WorldModelReward
    from wmrl_env.wrappers.vector import WorldModelVectorEnv

    def default(cls):
        return inspect.signature(cls.__init__).parameters["update_world_model"].default

    assert default(WorldModelReward) is True
    assert default(WorldModelReward) == default(WorldModelVectorEnv)


class Flatterer:
    """A hacked world model: every completion is excellent (0.95), whatever it does."""

    def predict(self, contexts, artifacts):
        return np.full(len(artifacts), 0.95)


def test_evaluation_executes_a_real_sample_and_raises_the_hacking_alarm() -> None:
    from wmrl_env.integrations.trl import WorldModelReward

    fusion = RewardFusion(method="wm", seed=0)
    prompts, completions = ["p"] * 40, ["x" * (i % 20) for i in range(40)]
    truth = np.array([max(0.0, 1.0 - abs(len(c) - 3) / 20) for c in completions])
    with LocalSandbox(timeout_s=30, memory_mb=512, max_workers=2) as sandbox:
        reward = WorldModelReward(Flatterer(), sandbox, length_job, fusion=fusion)
        state = reward.state_dict()
        with reward.evaluation(fraction=0.5, seed=1) as tally:
            values = reward(prompts, completions, target=[3] * 40)
    executed = np.array([v is not None for v in values])
    assert reward.n_eval_executed == executed.sum() and 10 <= executed.sum() <= 30
    assert reward.n_executed == 0 and not reward.evaluating
    np.testing.assert_equal(reward.state_dict(), state)
    np.testing.assert_allclose(np.array(values, dtype=float)[executed], truth[executed])
    metrics = tally.metrics()
    assert metrics["wmrl/eval_real_n"] == executed.sum()
    np.testing.assert_allclose(metrics["wmrl/eval_real_mean"], truth[executed].mean())
    assert metrics["wmrl/eval_wm_mean"] == pytest.approx(0.95) and metrics["wmrl/eval_wm_n"] == 40
    np.testing.assert_allclose(metrics["wmrl/eval_wm_gap"], 0.95 - truth[executed].mean())
    assert metrics["wmrl/eval_hacking_alarm"] == 1.0
    assert metrics["wmrl/eval_real_exec_seconds"] > 0


def test_config_and_grouping_errors(tiny_lm, tmp_path) -> None:
    from wmrl_env.integrations.trl import WorldModelReward, check_grpo_config

    with pytest.raises(ValueError, match="scale_rewards='group'"):
        check_grpo_config(grpo_config(tmp_path, scale_rewards="group"))
    world_model = CausalLMScorer(tiny_lm, min_score_mass=0.0)
    reward = WorldModelReward(world_model, None, length_job, num_generations=2)
    with pytest.raises(ValueError, match="do not share one prompt"):
        reward(["a", "b", "b", "b"], ["x"] * 4, target=[1] * 4)
    with pytest.raises(ValueError, match="groups of 2"):
        reward(["a", "a", "b"], ["x"] * 3, target=[1] * 3)
    with pytest.raises(ValueError, match="execute_per_group=1 cannot be used with method 'wmrl'"):
        WorldModelReward(world_model, None, length_job, num_generations=4, execute_per_group=1)


def test_chat_prompts_group_and_render(tiny_lm) -> None:
    from wmrl_env.integrations.trl import WorldModelReward

    world_model = CausalLMScorer(tiny_lm, min_score_mass=0.0)
    seen = []

    class Spy:
        def predict(self, contexts, artifacts):
            seen.append((contexts, artifacts))
            return world_model.predict(contexts, artifacts)

    fusion = RewardFusion(method="wm", seed=0)
    reward = WorldModelReward(Spy(), None, length_job, fusion=fusion)
    chat = [{"role": "user", "content": "Say hi"}]
    answer = [{"role": "assistant", "content": "hi"}]
    values = reward([chat, chat], [answer, answer])
    assert seen == [(["Say hi", "Say hi"], ["hi", "hi"])]
    assert reward.last_call.group_ids.tolist() == [0, 0]
    assert values == [0.0, 0.0]  # one group, identical scores: zero advantage
    assert json.dumps(values)


class ParseAwareModel:
    """A world model that cannot read a program that does not parse (like v2 / v3)."""

    def predict(self, contexts, artifacts):
        from wmrl_env.sandboxes import does_not_parse
        from wmrl_env.world_models.base import Prediction

        valid = np.array([not does_not_parse(a) for a in artifacts])
        scores = np.array(
            [len(a) / 10 if ok else np.nan for a, ok in zip(artifacts, valid, strict=True)]
        )
        reasons = ["" if ok else "unparseable" for ok in valid]
        return Prediction(scores, std=np.full(len(artifacts), 0.1), valid=valid, reasons=reasons)


def program_job(prompt: str, completion: str, target: int = 0) -> Job:
    """Runs the completion itself, then scores 1 (a program that does not parse crashes)."""
    program = completion + "\nimport json\njson.dump({'score': 1.0}, open('score.json', 'w'))\n"
    return Job(program, output_files=SCORE.files, scorer=SCORE, timeout_s=30)


PROGRAMS = ["x = 1", "x = (", "x = 22", "x = 333"]


@pytest.mark.parametrize("drawn", [False, True])
def test_an_unparseable_program_fails_without_forcing_its_group(drawn: bool) -> None:
    """Issue 23: before, its invalid prediction forced the whole group to execute (issue 28:
    ~40 % of the code policy's groups). Now it scores the failure score unexecuted, below
    its group's mean; a drawn group executes its other members only."""
    from wmrl_env.integrations.trl import WorldModelReward
    from wmrl_env.sandboxes import does_not_parse

    fraction = 1.0 if drawn else 0.0
    fusion = RewardFusion(method="wmrl", anchor_fraction=fraction, min_anchor_groups=0, seed=0)
    with LocalSandbox(timeout_s=30, memory_mb=512) as sandbox:
        reward = WorldModelReward(
            ParseAwareModel(),
            sandbox,
            program_job,
            fusion=fusion,
            score_range=(0.0, 1.0),
            known_failure=does_not_parse,
        )
        values = reward(["p"] * 4, PROGRAMS)
    call = reward.last_call
    assert call.known_failure.tolist() == [False, True, False, False]
    assert len(call.results) == (3 if drawn else 0)  # the known failure never runs
    assert call.is_anchor.all() == drawn
    assert call.fusion.rewards[1] == 0.0  # the failure score
    assert all(v is not None for v in values)
    assert values[1] < np.mean(values) and values[1] == min(values)


def test_without_known_failure_an_unparseable_program_still_forces_its_group() -> None:
    from wmrl_env.integrations.trl import WorldModelReward

    fusion = RewardFusion(method="wmrl", anchor_fraction=0.0, min_anchor_groups=0, seed=0)
    with LocalSandbox(timeout_s=30, memory_mb=512) as sandbox:
        reward = WorldModelReward(
            ParseAwareModel(), sandbox, program_job, fusion=fusion, score_range=(0.0, 1.0)
        )
        reward(["p"] * 4, PROGRAMS)
    call = reward.last_call
    assert call.is_anchor.all() and len(call.results) == 4
    assert call.results[1].status.is_program_failure and call.real_scores[1] == 0.0
