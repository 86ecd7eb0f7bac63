"""WMRLGRPOTrainer beyond one fused reward: extra reward functions, evaluation without
execution, and checkpoints that resume bit-identically (tiny Qwen2 policy, real sandbox)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_trl_reward import PROMPTS, grpo_config, length_job, recording_reward, tiny_lm

from wmrl_env.fusion import RewardFusion
from wmrl_env.sandboxes import LocalSandbox
from wmrl_env.world_models.lm.causal_lm import CausalLMScorer

pytestmark = [pytest.mark.trl, pytest.mark.transformers, pytest.mark.slow]

__all__ = ["tiny_lm"]  # the module-scoped fixture, shared with test_trl_reward


def odd_length(completions, **_):
    """A format reward beside the fused one."""
    return [float(len(c) % 2) for c in completions]


def make_trainer(tiny_lm, tmp_path, sandbox, extra=(), **overrides):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from wmrl_env.integrations.trl import WMRLGRPOTrainer

    dataset = Dataset.from_dict({"prompt": PROMPTS * 4, "target": [3, 5, 7, 9] * 4})
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, min_pairs=2, seed=0)
    reward = recording_reward(
        CausalLMScorer(tiny_lm, min_score_mass=0.0), sandbox, length_job, fusion=fusion
    )
    trainer = WMRLGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_lm),
        reward=reward,
        args=grpo_config(tmp_path, **overrides),
        extra_reward_funcs=extra,
        train_dataset=dataset,
        eval_dataset=dataset.select(range(8)),
        processing_class=AutoTokenizer.from_pretrained(tiny_lm, padding_side="left"),
    )
    return trainer, reward


def test_extra_reward_adds_a_centred_term_and_evaluation_executes_a_real_sample(tiny_lm, tmp_path):
    with LocalSandbox(timeout_s=30, memory_mb=512) as sandbox:
        trainer, reward = make_trainer(
            tiny_lm,
            tmp_path,
            sandbox,
            extra=[odd_length],
            max_steps=2,
            reward_weights=[1.0, 0.5],
            per_device_eval_batch_size=8,
        )
        trainer.eval_real_samples = 16  # of 8 prompts x 4 completions: each with chance 1/2
        trainer.train()
        call = reward.calls[-1]
        fmt = np.array(odd_length([_completion(trainer, i) for i in range(8)]))
        centred = fmt - np.repeat(fmt.reshape(-1, 4).mean(axis=1), 4)
        logged = np.array(list(trainer._logs["advantages"])[-8:])
        np.testing.assert_allclose(logged, call.fusion.advantages + 0.5 * centred, atol=1e-6)

        logged_names = set().union(*trainer.state.log_history)
        for name in ("kappa", "anchor_gap", "hacking_alarm", "anchor_gap_trend", "wm_weight"):
            assert f"wmrl/{name}" in logged_names  # TensorBoard / W&B take these names as-is
        executed, state = reward.n_executed, copy.deepcopy(reward.state_dict())
        metrics = trainer.evaluate()
    assert reward.n_executed == executed, "evaluation counted as training executions"
    np.testing.assert_equal(reward.state_dict(), state)  # the fusion state is untouched
    assert 0 < reward.n_eval_executed < 32
    assert metrics["wmrl/eval_real_n"] == reward.n_eval_executed  # none missing here
    assert 0.0 <= metrics["wmrl/eval_real_mean"] <= 1.0
    assert metrics["wmrl/eval_wm_n"] == 32 and "wmrl/eval_hacking_alarm" in metrics
    # TRL's own eval reward is now the real scores' mean (None where not executed)
    assert np.isfinite(metrics["eval_rewards/wmrl/mean"])
    assert "wmrl/eval_real_mean" in trainer.state.log_history[-1]


def _completion(trainer, i):
    return list(trainer._logs["completion"])[-8:][i]


def test_resume_from_checkpoint_is_bit_identical(tiny_lm, tmp_path):
    with LocalSandbox(timeout_s=30, memory_mb=512) as sandbox:
        full, full_reward = make_trainer(
            tiny_lm, tmp_path / "full", sandbox, max_steps=4, save_strategy="steps", save_steps=2
        )
        full.train()
        checkpoint = tmp_path / "full" / "grpo" / "checkpoint-2"
        assert (checkpoint / "wmrl_state.pkl").is_file()

        resumed, resumed_reward = make_trainer(
            tiny_lm, tmp_path / "resumed", sandbox, max_steps=4, save_strategy="no"
        )
        resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 4 and len(resumed_reward.calls) == 2
    for before, after in zip(full_reward.calls[2:], resumed_reward.calls, strict=True):
        assert after.returned == before.returned
        np.testing.assert_array_equal(after.is_anchor, before.is_anchor)
    np.testing.assert_equal(resumed_reward.state_dict(), full_reward.state_dict())
    for (name, a), (_, b) in zip(
        full.model.named_parameters(), resumed.model.named_parameters(), strict=True
    ):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy()), name


def test_config_checks_with_extra_rewards(tmp_path):
    from wmrl_env.integrations.trl import check_grpo_config

    check_grpo_config(grpo_config(tmp_path, reward_weights=[1.0, 0.3]), num_reward_funcs=2)
    with pytest.raises(ValueError, match="the fused reward's 1"):
        check_grpo_config(grpo_config(tmp_path, reward_weights=[2.0, 1.0]), num_reward_funcs=2)
    with pytest.raises(ValueError, match="scale_rewards=True"):

        class OldConfig:  # TRL < 0.22 took a bool
            scale_rewards = True

        check_grpo_config(OldConfig())
