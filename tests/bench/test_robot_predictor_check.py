"""The on-policy success-predictor check of the robot bench: ROC AUC against scikit-learn's,
the within-group AUC by brute force and against a known population value, Brier score and
calibration by hand, pairs taken from a round's info."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from wmrl_env.bench.robotics.predictor_check import predictor_check, round_pairs, within_group_auc


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_equals_scikit_learn_with_ties(seed):
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    labels = rng.random(40) < 0.4
    scores = np.round(rng.random(40) + 0.5 * labels, 1)  # rounded: many ties
    check = predictor_check(scores, labels)
    assert check.auc == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert (check.episodes, check.successes) == (40, int(labels.sum()))


def test_calibration_clips_scores_to_probabilities():
    check = predictor_check(np.array([1.7, -0.2, 0.5, 0.5]), np.array([1, 0, 1, 0], bool))
    # clipped to 1, 0, 0.5, 0.5: squared errors 0, 0, 0.25, 0.25
    assert check.brier == pytest.approx(0.125)
    assert check.mean_prediction == pytest.approx(0.5) == check.success_rate
    # ranks on the raw scores: of the 4 (success, failure) pairs 3 are ordered, 1 tied
    assert check.auc == pytest.approx(3.5 / 4)


def test_one_outcome_gives_nan_auc_and_bad_input_is_refused():
    assert np.isnan(predictor_check(np.array([0.2, 0.9]), np.zeros(2, bool)).auc)
    with pytest.raises(ValueError, match="differ"):
        predictor_check(np.zeros(3), np.zeros(2, bool))
    with pytest.raises(ValueError, match="no episode"):
        predictor_check(np.zeros(0), np.zeros(0, bool))
    with pytest.raises(ValueError, match="finite"):
        predictor_check(np.array([np.nan, 0.1]), np.array([True, False]))


def test_round_pairs_keep_real_episodes_with_a_valid_score():
    info = {
        "real_score": np.array([1.0, 0.0, np.nan, 1.0, 0.0]),  # the third was not executed
        "wm_score": np.array([0.8, 0.1, 0.4, np.nan, 0.3]),
        "wm_valid": np.array([True, True, True, False, True]),  # the fourth's prediction broke
        "group_id": np.array([0, 0, 1, 1, 2]),
    }
    scores, successes, groups = round_pairs(info)
    assert scores.tolist() == [0.8, 0.1, 0.3]
    assert successes.tolist() == [True, False, False]
    assert groups.tolist() == [0, 0, 2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_within_group_auc_counts_the_same_group_pairs_by_brute_force(seed):
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 5, 30)
    successes = rng.random(30) < 0.5
    scores = np.round(rng.random(30), 1)  # ties
    wins = total = 0.0
    for i in range(30):
        for j in range(30):
            if groups[i] == groups[j] and successes[i] and not successes[j]:
                total += 1
                wins += 1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0
    assert within_group_auc(scores, successes, groups) == pytest.approx(wins / total)
    assert predictor_check(scores, successes, groups).within_group_auc == pytest.approx(
        wins / total
    )


def test_within_group_auc_leaves_the_starts_difficulty_out():
    """Groups of 8 whose start sets both the success rate and a shift of every score; within
    a group successes score N(0.5, 1), failures N(0, 1): the within-group AUC is
    Phi(0.5 / sqrt 2) = 0.638 whatever the shifts, the pooled AUC far above it.

    With 4000 groups the estimate's SD is 0.005 (20 seeds); 0.02 is 4 SD."""
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(4000), 8)
    difficulty = rng.normal(0, 2, 4000)[groups]
    successes = rng.random(groups.size) < 1 / (1 + np.exp(-difficulty))
    scores = difficulty + rng.normal(0.5 * successes, 1.0)
    check = predictor_check(scores, successes, groups)
    assert check.within_group_auc == pytest.approx(NormalDist().cdf(0.5 / np.sqrt(2)), abs=0.02)
    assert check.auc > check.within_group_auc + 0.15


def test_within_group_auc_is_nan_without_mixed_groups_and_refuses_bad_shapes():
    assert np.isnan(within_group_auc(np.array([0.1, 0.9]), np.array([True, False]), [0, 1]))
    assert np.isnan(predictor_check(np.array([0.1, 0.9]), np.array([True, False])).within_group_auc)
    with pytest.raises(ValueError, match="differ"):
        within_group_auc(np.zeros(3), np.zeros(3, bool), np.zeros(2))
