"""Two scores per execution: the reward reads validation rows only, the private test stays on
the host, and both scores come from one run's predictions."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.datasets import Dataset
from wmrl_env.envs.ml_tasks.private_test import PrivateTestTask
from wmrl_env.envs.ml_tasks.scoring import METRICS


def _data(kind: str = "regression", n: int = 1000, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    if kind == "regression":
        y = X[:, 0] * 3 + rng.normal(size=n)
    else:
        y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(np.int64)
    return Dataset("toy", "Toy", "Rows.", kind, "y", X, y, ("a", "b", "c"))


def _outputs(task: PrivateTestTask, predictions: np.ndarray) -> dict[str, bytes]:
    body = "".join(f"{i},{float(p)!r}\n" for i, p in zip(task.test_ids, predictions, strict=True))
    return {"predictions.csv": ("id,prediction\n" + body).encode()}


def _rows(task: PrivateTestTask) -> tuple[np.ndarray, np.ndarray]:
    """Which dataset row each test.csv row is (features are unique in the toy data)."""
    index = {tuple(row): i for i, row in enumerate(task.dataset.X)}
    return np.array([index[tuple(r)] for r in task.X_test]), np.array(
        [index[tuple(r)] for r in task.X_train]
    )


def test_rows_split_three_ways_without_overlap() -> None:
    task = PrivateTestTask.from_dataset(
        "toy", _data(), metric="r2", private_fraction=0.6, validation_fraction=0.25
    )
    test_rows, fit_rows = _rows(task)
    assert len(task.private_positions) == 600
    assert len(task.valid_positions) == 100 and len(fit_rows) == 300
    assert set(test_rows).isdisjoint(fit_rows)
    assert len(set(test_rows)) + len(fit_rows) == 1000
    assert sorted([*task.valid_positions, *task.private_positions]) == list(range(700))
    # the validation and private rows are interleaved in test.csv, not in two blocks
    assert 0 < task.valid_positions.mean() / 700 < 1 and task.valid_positions.max() > 600


def test_the_split_depends_only_on_the_task_id() -> None:
    a = PrivateTestTask.from_dataset("toy", _data(), metric="r2", private_fraction=0.5)
    b = PrivateTestTask.from_dataset("toy", _data(), metric="r2", private_fraction=0.5)
    c = PrivateTestTask.from_dataset("toy2", _data(), metric="r2", private_fraction=0.5)
    assert a.csv_files == b.csv_files
    assert a.csv_files != c.csv_files


def test_both_scores_come_from_one_predictions_file() -> None:
    task = PrivateTestTask.from_dataset("toy", _data(), metric="r2", private_fraction=0.5)
    test_rows, _ = _rows(task)
    truth = task.dataset.y[test_rows]
    noisy = truth + np.where(np.isin(task.test_ids, task.valid_positions), 0.0, 5.0)
    outputs = _outputs(task, noisy)  # perfect on validation rows, bad on private rows
    job = task.make_job("pass")
    assert job.scorer(outputs) == 1.0
    assert task.validation_scorer(normalise=False).raw(outputs) == pytest.approx(1.0)
    expected = METRICS["r2"](truth[task.private_positions], noisy[task.private_positions])
    assert task.private_score(outputs) == pytest.approx(expected)
    assert task.private_score(outputs) < 0.5


def test_the_rewards_scorer_holds_no_private_label() -> None:
    """The job's scorer (what any reward reads) is pickled into executors: it must not carry
    the private labels in any form."""
    task = PrivateTestTask.from_dataset("toy", _data(), metric="r2", private_fraction=0.5)
    scorer = task.make_job("pass").scorer
    private = task._y_private
    assert len(scorer.y) == len(task.valid_positions)
    blob = pickle.dumps(scorer)
    hits = sum(value.tobytes() in blob for value in private[:50])
    assert hits == 0
    assert sum(value.tobytes() in blob for value in task._y_valid[:50]) == 50  # the control


def test_the_export_writes_no_scored_label(tmp_path) -> None:
    task = PrivateTestTask.from_dataset("toy", _data(), metric="r2", private_fraction=0.5)
    directory = task.export(tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == ["test.csv", "train.csv"]
    header = (directory / "test.csv").read_text().splitlines()[0]
    assert header == "id,a,b,c"
    exported = (directory / "train.csv").read_text() + (directory / "test.csv").read_text()
    scored = np.concatenate([task._y_valid, task._y_private])
    assert not any(repr(float(value)) in exported for value in scored[:200])
    assert sum(repr(float(value)) in exported for value in task.y_train[:200]) == 200


def test_classification_splits_are_stratified_and_folds_partition_the_public_rows() -> None:
    data = _data("binary")
    task = PrivateTestTask.from_dataset("toy", data, metric="roc_auc", private_fraction=0.5)
    rate = data.y.mean()
    assert abs(task._y_private.mean() - rate) < 0.01
    folds = [
        PrivateTestTask.from_dataset(
            "toy", data, metric="roc_auc", private_fraction=0.5, fold=(0, k, 5)
        )
        for k in range(5)
    ]
    private_rows = set(_rows(task)[0][task.private_positions])
    valid_rows = []
    for fold in folds:
        test_rows, _ = _rows(fold)
        valid_rows.append(set(test_rows[fold.valid_positions]))
        assert set(test_rows[fold.private_positions]) == private_rows
        assert 95 <= len(fold.valid_positions) <= 105
    assert set().union(*valid_rows) == set(range(1000)) - set(
        _rows(task)[0][task.private_positions]
    )
    assert sum(map(len, valid_rows)) == 500


def test_bad_input_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="private_fraction"):
        PrivateTestTask.from_dataset("toy", _data(), metric="r2", private_fraction=1.0)
    with pytest.raises(ValueError, match="does not fit"):
        PrivateTestTask.from_dataset("toy", _data(), metric="roc_auc", private_fraction=0.5)
    with pytest.raises(ValueError, match="fold"):
        PrivateTestTask.from_dataset(
            "toy", _data(), metric="r2", private_fraction=0.5, fold=(0, 5, 5)
        )
