"""The verl integration against the real verl package (its own DataProto, reward loop on Ray
actors, advantage computation and policy loss) on CPU.

Runs in the verl venv (``bash scripts/setup-verl.sh``); elsewhere it skips with that reason.
verl's whole GRPO step cannot run here: its rollout needs a vLLM, SGLang or TensorRT-LLM
server (docs/verl.md); every piece around the rollout runs for real.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from wmrl_env.fusion import RewardFusion

pytestmark = [pytest.mark.verl, pytest.mark.slow]

SETUP = Path(__file__).with_name("verl_setup.py")
ROOT = Path(__file__).resolve().parents[2]
GROUP_SIZE = 4
NUM_GROUPS = 3


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    from wmrl_env.world_models.lm.tiny_lm import build_tiny_causal_lm

    return str(build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm"), seed=0))


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
        # the workers import this checkout's wmrl_env (not whichever one is installed)
        runtime_env={
            "env_vars": {
                "RAY_AUTH_MODE": "disabled",
                "HF_HUB_OFFLINE": "1",
                "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            }
        },
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def reward_loop(tokenizer_path, ray_session):
    """verl's config, tokenizer and RewardLoopManager (2 reward workers: Ray actors loading
    verl_setup); one per Ray session, since verl names its worker actors."""
    import sys

    from verl.experimental.reward_loop.reward_loop import RewardLoopManager
    from verl.utils import hf_tokenizer

    sys.path.insert(0, str(SETUP.parent))
    config = verl_config(tokenizer_path)
    manager = RewardLoopManager(config)
    assert manager.reward_manager_cls.__name__ == "LengthReward"
    yield config, hf_tokenizer(tokenizer_path), manager
    sys.path.remove(str(SETUP.parent))


def verl_config(tokenizer_path: str, *overrides: str):
    """verl's own trainer config with the overrides a user adds (docs/verl.md)."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    user_overrides = [
        "reward.reward_manager.source=importlib",
        f"reward.reward_manager.module.path={SETUP}",
        "reward.reward_manager.name=LengthReward",
        "algorithm.adv_estimator=wmrl_test",
        "algorithm.use_kl_in_reward=False",
    ]
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                *user_overrides,
                f"actor_rollout_ref.model.path={tokenizer_path}",
                f"actor_rollout_ref.rollout.n={GROUP_SIZE}",
                "reward.num_workers=2",
                *overrides,
            ],
        )


def make_batch(tokenizer, step: int, responses: list[str], targets: list[int]):
    """A verl DataProto as the rollout hands it to the reward loop: left-padded prompts,
    right-padded responses, one uid per group of GROUP_SIZE samples."""
    import torch
    from verl import DataProto

    n = len(responses)
    uids = [f"step{step}-group{i // GROUP_SIZE}" for i in range(n)]
    prompts = [f"Write {t} characters:" for t in targets]
    prompt_ids = [tokenizer.encode(p) for p in prompts]
    response_ids = [tokenizer.encode(r) for r in responses]
    p_len, r_len = max(map(len, prompt_ids)), max(map(len, response_ids))
    pad = tokenizer.pad_token_id
    prompt_t = torch.full((n, p_len), pad)
    response_t = torch.full((n, r_len), pad)
    mask = torch.zeros((n, p_len + r_len), dtype=torch.int64)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids, strict=True)):
        prompt_t[i, p_len - len(p) :] = torch.tensor(p)
        response_t[i, : len(r)] = torch.tensor(r)
        mask[i, p_len - len(p) : p_len + len(r)] = 1
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_t,
            "responses": response_t,
            "attention_mask": mask,
            "input_ids": torch.cat([prompt_t, response_t], dim=1),
            "response_mask": mask[:, p_len:],
        },
        non_tensors={
            "uid": np.array(uids, dtype=object),
            "session_id": np.array([i % GROUP_SIZE for i in range(n)], dtype=object),
            "data_source": np.array(["length"] * n, dtype=object),
            "extra_info": np.array([{"target": t} for t in targets], dtype=object),
        },
    )


def step_inputs(step: int):
    """Responses for NUM_GROUPS groups: the first anchor group holds a crashing program, a
    known failure and an invalid prediction (forced: pi = 1), the first non-anchor group an
    invalid prediction of a program that runs, one of a program that crashes, and a known
    failure, all chosen from verl_setup's anchor draw."""
    import verl_setup

    from wmrl_env.integrations.verl import anchor_draw

    rng = np.random.default_rng(step)
    targets, responses, anchors = [], [], []
    for g in range(NUM_GROUPS):
        target = int(rng.integers(5, 15))
        anchor = anchor_draw(f"step{step}-group{g}", verl_setup.SEED) < verl_setup.ANCHOR_FRACTION
        anchors.append(anchor)
        for _ in range(GROUP_SIZE):
            targets.append(target)
            responses.append("x" * int(rng.integers(1, 20)))
    first_anchor = anchors.index(True) if True in anchors else None
    first_model = anchors.index(False) if False in anchors else None
    if first_anchor is not None:
        responses[first_anchor * GROUP_SIZE] = "crash" + responses[first_anchor * GROUP_SIZE]
        responses[first_anchor * GROUP_SIZE + 1] = "crash!" + responses[first_anchor * GROUP_SIZE]
        responses[first_anchor * GROUP_SIZE + 2] = "?" + responses[first_anchor * GROUP_SIZE + 2]
    if first_model is not None:
        responses[first_model * GROUP_SIZE + 1] = "?" + responses[first_model * GROUP_SIZE + 1]
        responses[first_model * GROUP_SIZE + 2] = "crash?" + responses[first_model * GROUP_SIZE + 2]
        responses[first_model * GROUP_SIZE + 3] = "crash!" + responses[first_model * GROUP_SIZE + 3]
    return responses, targets, np.repeat(anchors, GROUP_SIZE)


def reference(uids, responses, targets, anchors, fusion: RewardFusion, clusters) -> np.ndarray:
    """The advantages the fusion gives when fed the known truth directly, row by row: a crash
    scores 0 (the failure score), anchored or not; a known failure ("crash!") is never run and
    a non-anchored invalid prediction is run alone: both are known outcomes (the sample's
    reward, no evidence), and no row is left out. An anchored invalid prediction is run
    whether drawn or not: inclusion probability 1. ``clusters``: each row's task."""
    import verl_setup

    crash = np.array(["crash" in r for r in responses])
    known_failure = np.array(["crash!" in r for r in responses])
    wm = np.array([verl_setup.wm_score(r) for r in responses])
    valid = np.isfinite(wm)
    truth = [verl_setup.true_score(r, t) for r, t in zip(responses, targets, strict=True)]
    outcome = np.where(crash, 0.0, truth)
    known = np.where(known_failure, 0.0, np.where(~anchors & ~valid, outcome, np.nan))
    real = np.where(anchors & ~known_failure, outcome, np.nan)
    included = valid | anchors | np.isfinite(known)
    pi = np.where(anchors & ~valid, 1.0, verl_setup.ANCHOR_FRACTION)
    out = fusion.step(
        uids[included],
        np.where(valid, wm, np.nan)[included],
        real[included],
        wm_valid=valid[included],
        inclusion_probabilities=pi[included],
        known_scores=known[included],
        clusters=np.asarray(clusters, dtype=object)[included],
    )
    advantages = np.zeros(len(responses))
    advantages[included] = out.advantages
    return advantages


def overlong_penalty(responses) -> np.ndarray:
    """DAPO-style shaping verl adds to the reward: -0.1 per character beyond 15."""
    return np.array([-0.1 * max(0, len(r) - 15) for r in responses])


def centred(values, uids) -> np.ndarray:
    out = np.asarray(values, dtype=float).copy()
    for uid in np.unique(uids):
        out[uids == uid] -= out[uids == uid].mean()
    return out


def verl_advantage_step(batch, config, shaping=None, dtype=None):
    """What verl's v1 trainer does after the reward loop: token-level rewards (plus shaping,
    in another dtype if asked), then its advantage entry point with its own row keys."""
    import torch
    from verl.trainer.ppo.v1 import trainer_base

    rewards = batch.batch["rm_scores"].clone()
    if shaping is not None:
        last = batch.batch["response_mask"].sum(-1) - 1
        rewards[torch.arange(len(batch)), last] += torch.as_tensor(shaping, dtype=rewards.dtype)
    batch.batch["token_level_scores"] = batch.batch["rm_scores"]
    batch.batch["token_level_rewards"] = rewards if dtype is None else rewards.to(dtype)
    keys = [
        f"{u}_{s}_0"
        for u, s in zip(
            batch.non_tensor_batch["uid"], batch.non_tensor_batch["session_id"], strict=True
        )
    ]
    return trainer_base.compute_advantage_for_multi_trajectories(
        batch,
        batch_keys=keys,
        adv_estimator=config.algorithm.adv_estimator,
        num_repeat=GROUP_SIZE,
        config=config.algorithm,
    )


def last_token(out):
    import torch

    mask = out.batch["response_mask"]
    return out.batch["advantages"][torch.arange(len(out)), mask.sum(-1) - 1].double().numpy()


@pytest.mark.parametrize("dtype", [None, "float64", "bfloat16"])
def test_reward_loop_and_advantage_through_verl(reward_loop, dtype):
    import torch
    import verl_setup

    config, tokenizer, manager = reward_loop
    estimator = verl_setup.ESTIMATOR
    expected_fusion = RewardFusion(**verl_setup.FUSION_KWARGS)
    estimator.fusion.load_state_dict(expected_fusion.state_dict())
    torch_dtype = getattr(torch, dtype) if dtype else None
    seen_anchor = seen_model = False
    offset = {None: 0, "float64": 10, "bfloat16": 20}[dtype]  # fresh uids per case
    for step in range(offset, offset + 3):
        responses, targets, anchors = step_inputs(step)
        seen_anchor |= anchors.any()
        seen_model |= (~anchors).any()
        batch = make_batch(tokenizer, step, responses, targets)
        # verl's reward loop: padded and chunked over its 2 workers, a group split between them
        rm = manager.compute_rm_score(batch)
        assert list(rm.non_tensor_batch["wmrl_is_anchor"]) == anchors.tolist()
        batch = batch.union(rm)
        # the trainer reorders rows (balance_batch) before the advantage step
        order = np.random.default_rng(100 + step).permutation(len(batch))
        batch = batch.select_idxs(order)
        shaped = [responses[i] for i in order]
        shaping = overlong_penalty(shaped)
        out = verl_advantage_step(batch, config, shaping, torch_dtype)
        uids = batch.non_tensor_batch["uid"]
        call = estimator.last_call
        # each row's task for the gate: its prompt, which only the target sets
        clusters = [r.cluster for r in call.records]
        ordered_targets = [targets[i] for i in order]
        assert len(set(zip(clusters, ordered_targets, strict=True))) == len(set(clusters))
        assert len(set(clusters)) == len(set(ordered_targets))
        expected = reference(
            uids, shaped, ordered_targets, anchors[order], expected_fusion, clusters
        )
        scored = np.array([np.isfinite(r.reward) for r in call.records])
        expected[scored] += centred(shaping[scored], uids[scored])
        # bf16 holds 8 bits: rewards and advantages round by <= 0.004 each, and the estimator
        # ignores differences within 4 eps (0.03) of the stored reward as rounding
        atol = 1e-6 if dtype != "bfloat16" else 0.08
        np.testing.assert_allclose(last_token(out), expected, rtol=1e-6, atol=atol)
        advantages = out.batch["advantages"]
        mask = out.batch["response_mask"]
        torch.testing.assert_close(advantages, advantages[:, :1].expand_as(advantages) * mask)
        # a retry of the same batch gives the same advantages (nothing consumed twice)
        again = verl_advantage_step(batch, config, shaping, torch_dtype)
        np.testing.assert_allclose(last_token(again), last_token(out))
        # groups whole: a group is all anchor or all world model
        for uid in np.unique(uids):
            assert (
                len({r.is_anchor for r, u in zip(call.records, uids, strict=True) if u == uid}) == 1
            )
        crash = np.array(["crash" in r for r in shaped])
        anchor_rows = anchors[order]
        # a crashing program is scored (the failure score), never missing; in an anchor group
        # its advantage falls below its group's mean
        assert not any(r.failed for r in call.records)
        known_failure = np.array(["crash!" in r for r in shaped])
        for i in np.flatnonzero(crash & anchor_rows & ~known_failure):
            members = uids == uids[i]
            assert call.records[i].real_score == 0.0
            assert last_token(out)[i] < last_token(out)[members].mean()
        for i in np.flatnonzero(crash & ~anchor_rows & ~known_failure):  # run alone: known
            assert not call.records[i].wm_valid and call.records[i].known_score == 0.0
        for i in np.flatnonzero(known_failure):  # never run, anchored or not: known, scored 0
            members = uids == uids[i]
            assert np.isnan(call.records[i].real_score) and call.records[i].known_score == 0.0
            assert last_token(out)[i] < last_token(out)[members].mean()
        # nothing is left out: an invalid prediction outside the anchors was run alone
        assert call.metrics["wmrl/n_left_out"] == 0
        assert call.metrics["wmrl/n_known"] == int(known_failure.sum()) + 2 * int((~anchors).any())
        assert call.metrics["wmrl/ambiguous_rows"] == 0
        for name in ("anchor_gap", "kappa", "hacking_alarm", "anchor_gap_trend"):
            assert f"wmrl/{name}" in call.metrics
    assert seen_anchor and seen_model
    assert len(estimator.ledger) == 0  # every record was used


def test_validation_executes_and_dropped_groups_do_not_stay(reward_loop):
    """verl's own reward loop on a validation batch (executed for real, nothing filed for
    training) and on training batches whose groups dynamic sampling drops (records dropped
    after max_age batches, memory bounded)."""
    import verl_setup

    config, tokenizer, manager = reward_loop
    estimator = verl_setup.ESTIMATOR
    ledger = estimator.ledger
    waiting = len(ledger)

    responses, targets, _ = step_inputs(50)
    val = make_batch(tokenizer, 50, responses, targets)
    val.meta_info["validate"] = True
    rm = manager.compute_rm_score(val)
    assert rm.non_tensor_batch["wmrl_validation"].all()
    truth = np.array(
        [
            0.0 if "crash" in r else verl_setup.true_score(r, t)
            for r, t in zip(responses, targets, strict=True)
        ]
    )
    np.testing.assert_allclose(rm.non_tensor_batch["wmrl_real_score"].astype(float), truth)
    assert len(ledger) == waiting, "validation samples were filed for training"

    for step in range(60, 60 + ledger_max_age() + 2):
        responses, targets, _ = step_inputs(step)
        batch = make_batch(tokenizer, step, responses, targets)
        batch = batch.union(manager.compute_rm_score(batch))
        # dynamic sampling keeps the first group only; the others never reach the advantages
        kept = batch.select_idxs(np.arange(GROUP_SIZE))
        verl_advantage_step(kept, config)
        if step == 60:  # the validation's figures are logged with the next batch
            metrics = estimator.last_call.metrics
            assert metrics["wmrl/eval_real_n"] == len(responses)
            np.testing.assert_allclose(metrics["wmrl/eval_real_mean"], truth.mean())
            assert "wmrl/eval_wm_mean" in metrics and "wmrl/eval_hacking_alarm" in metrics
        # at most the dropped groups of the last max_age + 1 batches wait; older ones are gone
        assert len(ledger) <= waiting + (ledger_max_age() + 1) * (NUM_GROUPS - 1) * GROUP_SIZE
    assert "wmrl/eval_real_n" not in estimator.last_call.metrics


def ledger_max_age() -> int:
    from wmrl_env.integrations.verl import Ledger

    return Ledger().max_age


def test_fused_advantages_reach_verls_policy_loss():
    """verl's vanilla PPO loss, on policy (ratio 1), token-mean: d loss / d log_prob = -A/T."""
    import torch
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    advantages = torch.tensor([0.7, -0.2, 0.0, 1.3])[:, None] * torch.ones(4, 5)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]])
    advantages = advantages * mask
    old = torch.zeros(4, 5)
    log_prob = torch.zeros(4, 5, requires_grad=True)
    config = OmegaConf.create(
        {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "global_batch_info": {}}
    )
    loss, _ = get_policy_loss_fn("vanilla")(old, log_prob, advantages, mask, "token-mean", config)
    loss.backward()
    torch.testing.assert_close(log_prob.grad, -advantages * mask / mask.sum())


def test_estimator_fails_loudly_without_its_records():
    import torch

    from wmrl_env.integrations.verl import FusedAdvantageEstimator, Ledger, SampleRecord

    ledger = Ledger()
    # gate off: with no anchor yet the evidence gate gives the world model weight 0
    estimator = FusedAdvantageEstimator(RewardFusion(seed=0, wm_gate="off"), ledger)
    rewards = torch.zeros(2, 3)
    rewards[:, -1] = torch.tensor([0.25, 0.5])
    mask = torch.ones(2, 3)
    with pytest.raises(ValueError, match="index"):
        estimator(rewards, mask, index=None)
    with pytest.raises(LookupError, match="use_kl_in_reward"):
        estimator(rewards, mask, index=np.array(["g", "g"], dtype=object))
    ledger.put([SampleRecord("g", v, v, True, np.nan, False, False, 0.1) for v in (0.25, 0.5)])
    advantages, _ = estimator(rewards, mask, index=np.array(["g", "g"], dtype=object))
    assert advantages.shape == (2, 3) and (advantages[0] < 0).all() and (advantages[1] > 0).all()


@pytest.mark.parametrize(("method", "ambiguous"), [("wmrl", 0), ("ppi", 2)])
def test_rows_of_equal_reward_are_counted_when_their_advantages_could_differ(method, ambiguous):
    import torch

    from wmrl_env.integrations.verl import FusedAdvantageEstimator, Ledger, SampleRecord

    ledger = Ledger()
    estimator = FusedAdvantageEstimator(RewardFusion(method=method, seed=0), ledger)
    # one anchor group: two rows share the real score 0.5 but not the world-model score
    real, wm = [0.5, 0.5, 0.9, 0.1], [0.2, 0.7, 0.8, 0.1]
    ledger.put(
        [SampleRecord("a", r, s, True, r, False, True, 0.5) for r, s in zip(real, wm, strict=True)]
    )
    ledger.put([SampleRecord("b", s, s, True, np.nan, False, False, 0.5) for s in wm])
    rewards = torch.zeros(8, 2)
    rewards[:, -1] = torch.tensor(real + wm)
    index = np.array(["a"] * 4 + ["b"] * 4, dtype=object)
    estimator(rewards, torch.ones(8, 2), index=index)
    assert estimator.last_call.metrics["wmrl/ambiguous_rows"] == ambiguous


def test_default_metrics_log_warns_while_the_hacking_alarm_is_up(caplog):
    from wmrl_env.integrations.verl.estimator import _log_metrics

    with caplog.at_level("INFO", logger="wmrl_env.integrations.verl.estimator"):
        _log_metrics({"wmrl/kappa": 1.5, "wmrl/hacking_alarm": 0.0})
        _log_metrics({"wmrl/kappa": 1.5, "wmrl/hacking_alarm": 1.0})
    assert [r.levelname for r in caplog.records] == ["INFO", "WARNING"]
    assert "wmrl/kappa=1.5" in caplog.records[0].getMessage()
