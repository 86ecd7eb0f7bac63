"""The on-policy success-predictor check of the robot bench: ROC AUC against scikit-learn's,
Brier score and calibration by hand, pairs taken from a round's info."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.bench.robotics.predictor_check import predictor_check, round_pairs


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
    }
    scores, successes = round_pairs(info)
    assert scores.tolist() == [0.8, 0.1, 0.3]
    assert successes.tolist() == [True, False, False]
