"""The factorized per-task policy: its gradient, its generalisation to related programs,
and the per-task bench running with it."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.bench.factorized import FactorizedPolicy, component_matrix, make_policy


def _grammar_choices(count: int, seed: int) -> list[dict]:
    from wmrl_env.envs.ml_tasks.grammar import sample_programs

    return [p.choices for p in sample_programs(count, seed)]


def test_an_update_on_one_program_raises_the_programs_sharing_its_components() -> None:
    """A positive advantage on one grammar program raises the probability of every program
    that shares a component with it relative to those sharing none, more the more they
    share; the tabular policy moves only the program itself."""
    choices = _grammar_choices(60, seed=3)
    phi, _ = component_matrix(choices)
    target = 0
    shared = phi @ phi[target]  # components each program shares with the target
    policy = FactorizedPolicy(1, choices, learning_rate=1.0, seed=0)
    before = policy.probabilities()[0]
    policy.update(np.array([0]), np.array([target]), np.array([1.0]))
    ratio = policy.probabilities()[0] / before
    others = np.arange(len(choices)) != target
    # the logit change is a sum over shared components: strictly monotone in their number
    assert ratio[others & (shared >= 2)].min() > ratio[others & (shared == 0)].max()
    assert ratio[others & (shared >= 1)].min() > ratio[others & (shared == 0)].max()
    levels = sorted(set(shared[others].astype(int)))
    means = [ratio[others & (shared == k)].mean() for k in levels]
    assert means == sorted(means) and len(levels) >= 3
    tabular = make_policy("tabular", 1, len(choices), choices, learning_rate=1.0)
    tabular.update(np.array([0]), np.array([target]), np.array([1.0]))
    moved = tabular.probabilities()[0] / before
    assert moved[others] == pytest.approx(np.full(others.sum(), moved[others][0]))


def test_the_factorized_gradient_is_that_of_the_weighted_log_likelihood() -> None:
    """One SGD step on the weights equals lr * d/dW of the mean over each task's
    trajectories of A * log pi(a), pi = softmax(W @ Phi.T), by central finite differences;
    an absent task's weights stay."""
    choices = [{"m": m, "s": s, "c": c} for m in "ab" for s in "xyz" for c in "uv"]
    tasks, programs = np.array([0, 0, 2, 2, 2]), np.array([1, 7, 0, 3, 1])
    advantages = np.array([1.0, -0.5, 2.0, -1.0, 0.3])
    policy = FactorizedPolicy(3, choices, learning_rate=0.1)
    phi = policy.components
    policy.weights = np.random.default_rng(0).normal(size=policy.weights.shape)
    policy.logits = policy.weights @ phi.T
    start = policy.weights.copy()

    def objective(weights: np.ndarray) -> float:
        logits = weights @ phi.T
        log_pi = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        terms = advantages * log_pi[tasks, programs]
        return sum(terms[tasks == t].mean() for t in np.unique(tasks))

    numeric = np.zeros_like(start)
    for index in np.ndindex(start.shape):
        step = np.zeros_like(start)
        step[index] = 1e-6
        numeric[index] = (objective(start + step) - objective(start - step)) / 2e-6
    policy.update(tasks, programs, advantages)
    assert policy.weights - start == pytest.approx(0.1 * numeric, abs=1e-8)
    assert (policy.weights[1] == start[1]).all()
    assert policy.logits == pytest.approx(policy.weights @ phi.T)


def test_bad_policy_input_is_refused() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        make_policy("neural", 1, 2, [{}, {}], 1.0)
    with pytest.raises(ValueError, match="components of each of the 3"):
        make_policy("factorized", 1, 3, [{"a": 1}], 1.0)
    with pytest.raises(ValueError, match="needs each program's components"):
        component_matrix([])


def test_the_v1_bench_runs_with_the_factorized_policy() -> None:
    """A tiny per-task run on the first suite: the factorized policy over preprocessing x
    model x capacity learns (its greedy score rises above the uniform start) and spends the
    executions the tabular policy spends."""
    from wmrl_env.bench.bank import TaskBank
    from wmrl_env.bench.pertask import run_arm
    from wmrl_env.bench.pertask_config import PerTaskConfig
    from wmrl_env.bench.suite import sample_tasks, split_tasks

    bank = TaskBank.of(sample_tasks(split_tasks("heldout"), 4))
    assert len(bank.choices) == bank.num_programs == 72
    assert component_matrix(bank.choices)[0].shape == (72, 4 + 6 + 3)
    runs = {
        kind: run_arm(bank, PerTaskConfig(policy=kind, rounds=8, group_size=4), "real", 0, 1.0,
                      None)
        for kind in ("tabular", "factorized")
    }  # fmt: skip
    factorized = runs["factorized"]
    assert factorized.steps[0].true_score == pytest.approx(bank.scores.mean(axis=1).mean())
    assert factorized.steps[-1].true_score > factorized.steps[0].true_score
    assert factorized.totals.real_executions == runs["tabular"].totals.real_executions == 8 * 16
