"""predictions.csv validation, metrics and the normalised score."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.scoring import METRICS, normalised_score, read_predictions
from wmrl_env.sandboxes.job import InvalidOutputError

IDS = np.array([0, 1, 2])


def _outputs(text: str) -> dict[str, bytes]:
    return {"predictions.csv": text.encode()}


def test_reads_rows_in_any_order_and_aligns_them_to_the_ids() -> None:
    values = read_predictions(_outputs("id,prediction\n2,0.2\n0,0.0\n1,1e-3\n"), IDS)
    np.testing.assert_array_equal(values, [0.0, 1e-3, 0.2])


def test_accepts_integral_floats_as_ids_and_labels_and_a_bom() -> None:
    text = "\ufeffid,prediction\n0.0,1\n1,2.0\n2,1\n"
    values = read_predictions(_outputs(text), IDS, classes=np.array([1, 2]))
    np.testing.assert_array_equal(values, [1, 2, 1])


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({}, "predictions.csv was not written"),
        (_outputs(""), "is empty"),
        ({"predictions.csv": b"\xff\xfe\x00"}, "not UTF-8"),
        (_outputs("id,pred\n0,1\n1,1\n2,1\n"), "header is 'id,pred'"),
        (_outputs("id,prediction\n0,1\n1,1\n"), "has 2 prediction rows; expected 3"),
        (_outputs("id,prediction\n0,1\n1,1\n7,1\n"), "id 7 is not a test id"),
        (_outputs("id,prediction\n0,1\n1,1\n1,1\n"), "id 1 is repeated"),
        (_outputs("id,prediction\n0,1\nx,1\n2,1\n"), "id 'x' is not an integer"),
        (_outputs("id,prediction\n0,1\n1.5,1\n2,1\n"), "id '1.5' is not an integer"),
        (_outputs("id,prediction\n0,1\n1,1,3\n2,1\n"), "row 3 has 3 fields"),
        (_outputs("id,prediction\n0,1\n1,cat\n2,1\n"), "prediction 'cat' is not a number"),
        (_outputs("id,prediction\n0,1\n1,nan\n2,1\n"), "NaN or infinite"),
        (_outputs("id,prediction\n0,1\n1,inf\n2,1\n"), "NaN or infinite"),
    ],
)
def test_invalid_outputs_say_what_is_wrong(outputs, message) -> None:
    with pytest.raises(InvalidOutputError, match=message):
        read_predictions(outputs, IDS)


def test_labels_outside_the_classes_are_wrong_dtype() -> None:
    binary = np.array([0, 1])
    with pytest.raises(InvalidOutputError, match=r"'0.5' is not a class label; expected one of"):
        read_predictions(_outputs("id,prediction\n0,1\n1,0.5\n2,1\n"), IDS, classes=binary)
    with pytest.raises(InvalidOutputError, match="'3' is not a class label"):
        read_predictions(_outputs("id,prediction\n0,1\n1,3\n2,1\n"), IDS, classes=binary)


def test_metrics_on_known_values() -> None:
    y = np.array([0.0, 1.0, 2.0, 3.0])
    assert METRICS["rmse"](y, y + 2) == pytest.approx(2.0)
    assert METRICS["r2"](y, y) == 1.0
    assert METRICS["r2"](y, np.full(4, y.mean())) == pytest.approx(0.0)
    assert METRICS["accuracy"](np.array([1, 2, 3]), np.array([1, 2, 0])) == pytest.approx(2 / 3)
    labels = np.array([0, 0, 1, 1])
    assert METRICS["roc_auc"](labels, np.array([0.1, 0.4, 0.35, 0.8])) == pytest.approx(0.75)
    assert METRICS["roc_auc"](labels, np.full(4, 0.5)) == 0.5


@pytest.mark.parametrize(
    ("raw", "baseline", "reference", "expected"),
    [
        (0.75, 0.5, 1.0, 0.5),  # halfway, higher is better
        (1.0, 0.5, 0.9, 1.0),  # better than the best seen: clipped to 1
        (0.2, 0.5, 1.0, 0.0),  # worse than the baseline: clipped to 0
        (15.0, 20.0, 10.0, 0.5),  # RMSE: lower is better, same formula
        (25.0, 20.0, 10.0, 0.0),
        (5.0, 20.0, 10.0, 1.0),
        (0.5, 0.5, 0.5, 1.0),  # degenerate: reference equals baseline
        (0.4, 0.5, 0.5, 0.0),
    ],
)
def test_normalised_score(raw, baseline, reference, expected) -> None:
    assert normalised_score(raw, baseline=baseline, reference=reference) == pytest.approx(expected)


def test_normalised_score_keeps_nan() -> None:
    assert math.isnan(normalised_score(math.nan, baseline=0.0, reference=1.0))
