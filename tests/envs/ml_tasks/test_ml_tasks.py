"""Task construction: seeded splits, hidden labels, read-only export, jobs and the split."""

from __future__ import annotations

import pickle
import stat

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks import ALL_TASKS, HELDOUT_TASKS, TRAIN_TASKS, get_task, task_ids
from wmrl_env.envs.ml_tasks.curate import LEGACY_TASKS
from wmrl_env.envs.ml_tasks.datasets import load_dataset
from wmrl_env.envs.ml_tasks.env import MAX_DESCRIPTION_CHARS
from wmrl_env.envs.ml_tasks.registry import manifest, manifest_entry
from wmrl_env.envs.ml_tasks.tasks import MLTask
from wmrl_env.sandboxes.job import InvalidOutputError
from wmrl_env.utils.hashing import artifact_hash


def _predictions(task: MLTask, values) -> dict[str, bytes]:
    lines = "".join(f"{i},{v}\n" for i, v in zip(task.test_ids, values, strict=True))
    return {"predictions.csv": ("id,prediction\n" + lines).encode()}


def test_three_disjoint_splits_of_every_kind() -> None:
    wm, train, heldout = task_ids("wm"), task_ids("train"), task_ids("heldout")
    assert len(wm) >= 80 and len(train) >= 75 and len(heldout) >= 38
    assert len(set(wm) | set(train) | set(heldout)) == len(wm) + len(train) + len(heldout)
    assert task_ids("all") == ALL_TASKS == TRAIN_TASKS + HELDOUT_TASKS + wm
    assert (train, heldout) == (TRAIN_TASKS, HELDOUT_TASKS)
    for split in (wm, train, heldout):
        kinds = [manifest_entry(t)["kind"] for t in split]
        assert {kinds.count(k) >= 3 for k in ("binary", "multiclass", "regression")} == {True}
    with pytest.raises(ValueError, match="split must be one of"):
        task_ids("test")  # type: ignore[arg-type]


def test_the_18_original_tasks_keep_their_ids_and_split() -> None:
    """Each is in its old split, or dropped by the table build (not learnable), with the
    reason recorded; its id stays valid either way."""
    dropped = {e["task_id"]: e["reason"] for e in manifest().get("dropped", [])}
    for task_id, (_source, split, metric, _rows) in LEGACY_TASKS.items():
        assert manifest_entry(task_id)["split"] == split
        assert task_id in task_ids(split) or dropped[task_id].startswith("not learnable")
        assert get_task(task_id).metric == metric


SAMPLE = (*LEGACY_TASKS, *sorted(ALL_TASKS)[:: max(1, len(ALL_TASKS) // 20)])


@pytest.mark.parametrize("task_id", sorted(set(SAMPLE)))
def test_task_split_and_description(task_id) -> None:
    task = get_task(task_id)
    assert len(task.test_ids) == len(task.X_test) and task.X_train.shape[1] == task.X_test.shape[1]
    assert 0.25 < len(task.X_test) / (len(task.X_test) + len(task.X_train)) < 0.35
    text = task.description
    assert text.isascii() and 0 < len(text) <= MAX_DESCRIPTION_CHARS
    assert task.metric.replace("_", "-").split("-")[0].lower() in text.lower().replace("^", "")


def test_splits_are_deterministic_and_stratified() -> None:
    data = load_dataset("wine")
    a = MLTask.from_dataset("wine", data, metric="accuracy")
    b = MLTask.from_dataset("wine", data, metric="accuracy")
    other = MLTask.from_dataset("wine-copy", data, metric="accuracy")
    np.testing.assert_array_equal(a.X_test, b.X_test)
    assert not np.array_equal(a.X_test, other.X_test)  # the seed comes from the task id
    train_share = np.bincount(a.y_train) / len(a.y_train)
    all_share = np.bincount(data.y) / len(data.y)
    np.testing.assert_allclose(train_share, all_share, atol=0.02)


def test_train_and_test_rows_are_disjoint_and_complete() -> None:
    data = load_dataset("iris")
    task = MLTask.from_dataset("iris", data, metric="accuracy")
    rows = {tuple(r) for r in np.vstack([task.X_train, task.X_test])}
    assert rows == {tuple(r) for r in data.X}
    assert len(task.X_train) + len(task.X_test) == len(data.X)


def test_max_rows_subsamples_deterministically() -> None:
    task = get_task("fair")
    assert len(task.X_train) + len(task.X_test) == manifest_entry("fair")["max_rows"] == 1500


def test_metric_must_fit_the_kind() -> None:
    with pytest.raises(ValueError, match="does not fit a multiclass task"):
        MLTask.from_dataset("iris", load_dataset("iris"), metric="roc_auc")
    with pytest.raises(ValueError, match="unknown metric"):
        MLTask.from_dataset("iris", load_dataset("iris"), metric="f1")


def test_unknown_task_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown task 'titanic'.*task_ids\(\).*synth_<f"):
        get_task("titanic")


def test_export_is_read_only_holds_no_labels_and_is_reused(tmp_path) -> None:
    task = get_task("iris")
    directory = task.export(tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == ["test.csv", "train.csv"]
    assert task.export(tmp_path) == directory
    for path in (directory, directory / "train.csv", directory / "test.csv"):
        assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    header, *rows = (directory / "test.csv").read_text().splitlines()
    assert header.split(",") == ["id", *task.dataset.feature_names]
    assert sorted(task.dataset.feature_names) == sorted(load_dataset("iris").feature_names)
    assert len(rows) == len(task.test_ids)
    train_header = (directory / "train.csv").read_text().splitlines()[0]
    assert train_header.endswith(",target")


def test_missing_values_are_empty_cells(tmp_path) -> None:
    task = get_task("fertility")
    text = (task.export(tmp_path) / "train.csv").read_text()
    assert ",," in text or ",\n" in text
    assert "nan" not in text


def test_scorer_normalises_and_validates() -> None:
    task = get_task("breast_cancer")
    scorer = task.scorer()
    y = task._y_test
    perfect = _predictions(task, y.astype(float))
    assert task.evaluate(perfect) == 1.0
    assert scorer(perfect) == 1.0
    assert scorer(_predictions(task, np.full(len(y), 0.5))) == 0.0  # the trivial baseline
    assert task.scorer(normalise=False)(perfect) == 1.0
    with pytest.raises(InvalidOutputError, match="not written"):
        scorer({})
    restored = pickle.loads(pickle.dumps(scorer))
    assert restored(perfect) == 1.0


def test_trivial_baselines() -> None:
    assert get_task("breast_cancer").baseline == 0.5
    iris = get_task("iris")
    assert iris.baseline == pytest.approx(1 / 3)
    diabetes = get_task("diabetes")
    assert -0.05 < diabetes.baseline <= 0.0  # R^2 of the train mean on the test set


def test_make_job_carries_the_protocol(tmp_path) -> None:
    task = get_task("wine")
    job = task.make_job("print(1)", data_root=tmp_path, tags={"step": 3})
    assert set(job.inputs) == {"train.csv", "test.csv"}
    assert job.output_files == ("predictions.csv",)
    assert job.timeout_s == task.timeout_s
    assert job.tags == {"task_id": "wine", "program_hash": artifact_hash("print(1)"), "step": 3}
    assert f"{task.timeout_s:g} s" in task.description
    assert task.make_job("x", data_root=tmp_path, timeout_s=5).timeout_s == 5
