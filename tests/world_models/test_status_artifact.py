"""The committed status models are ``.npz`` files (no pickle) that load under any scikit-learn,
or none, and give the probabilities of the classifier that was fitted; other files are refused
with the way to rebuild them."""

from __future__ import annotations

import json
import pickle
import sys

import numpy as np
import pytest
import sklearn

from wmrl_env.world_models.artifact_file import read_state, write_state
from wmrl_env.world_models.programs.ml_default import ARTIFACTS, STATUS_ARTIFACTS
from wmrl_env.world_models.programs.program_features import PROGRAM_FEATURE_NAMES
from wmrl_env.world_models.programs.status_model import FORMAT_VERSION, StatusModel
from wmrl_env.world_models.programs.tree_classifier import TreeClassifier


def status_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    x[rng.random(x.shape) < 0.1] = np.nan
    a, b = np.nan_to_num(x[:, 0]), np.nan_to_num(x[:, 1])
    labels = np.where(a > 1, "crashed:ValueError", np.where(b > 1.5, "timeout", "ok"))
    return x, labels


def committed_rows(n: int) -> np.ndarray:
    """Rows as wide as the committed models read, most program features missing."""
    width = read_state(STATUS_ARTIFACTS["v3"])["classifier"].n_features
    rows = np.random.default_rng(5).normal(size=(n, width)) * 3
    rows[np.random.default_rng(6).random(rows.shape) < 0.5] = np.nan
    return rows


@pytest.mark.parametrize("labels_kind", ["multiclass", "binary", "one label"])
def test_a_status_model_round_trips_to_the_same_probabilities(labels_kind, tmp_path):
    x, labels = status_rows(800, 0)
    if labels_kind == "binary":
        labels = np.where(labels == "timeout", "ok", labels)
    elif labels_kind == "one label":
        labels = np.full(len(labels), "ok")
    model = StatusModel(min_count=5, smoothing=0.02, seed=3).fit(x, labels)
    path = model.save(tmp_path / "status.npz")
    with np.load(path, allow_pickle=False) as stored:  # no pickle inside
        assert all(stored[name].dtype != object for name in stored.files)
    loaded = StatusModel.load(path)
    unseen, _ = status_rows(300, 1)
    for got, expected in zip(loaded.predict(unseen), model.predict(unseen), strict=True):
        np.testing.assert_array_equal(got, expected)
    assert (loaded.labels, loaded.min_count, loaded.smoothing, loaded.seed) == (
        model.labels,
        5,
        0.02,
        3,
    )


def test_a_fitted_status_model_predicts_what_its_scikit_learn_classifier_predicts(monkeypatch):
    from sklearn.ensemble import HistGradientBoostingClassifier

    fitted = []  # the scikit-learn classifier StatusModel.fit converts
    convert = TreeClassifier.from_sklearn
    monkeypatch.setattr(
        TreeClassifier, "from_sklearn", lambda clf: fitted.append(clf) or convert(clf)
    )
    x, labels = status_rows(800, 0)
    model = StatusModel(min_count=5).fit(x, labels)
    (classifier,) = fitted
    assert isinstance(classifier, HistGradientBoostingClassifier)
    unseen, _ = status_rows(300, 1)
    np.testing.assert_array_equal(
        model._classifier.predict_proba(unseen), classifier.predict_proba(unseen)
    )


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_a_committed_status_model_is_numpy_data_and_loads_under_another_scikit_learn(
    version, monkeypatch
):
    with np.load(STATUS_ARTIFACTS[version], allow_pickle=False) as stored:
        header = json.loads(str(stored["header"]))
        assert all(stored[name].dtype != object for name in stored.files)
    assert header["state"]["version"] == FORMAT_VERSION
    rows = committed_rows(200)
    expected = StatusModel.load(STATUS_ARTIFACTS[version]).predict(rows)
    monkeypatch.setattr(sklearn, "__version__", "1.3.0")
    got = StatusModel.load(STATUS_ARTIFACTS[version]).predict(rows)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(expected[0].sum(axis=1), 1.0)


def test_a_committed_status_model_loads_and_predicts_without_scikit_learn(monkeypatch):
    rows = committed_rows(50)
    expected = StatusModel.load(STATUS_ARTIFACTS["v3"]).predict(rows)
    for name in [name for name in sys.modules if name.split(".")[0] == "sklearn"]:
        monkeypatch.setitem(sys.modules, name, None)  # any import of scikit-learn fails
    with pytest.raises(ImportError):
        import sklearn.ensemble  # noqa: F401
    got = StatusModel.load(STATUS_ARTIFACTS["v3"]).predict(rows)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_files_that_are_not_status_models_are_refused(tmp_path):
    x, labels = status_rows(300, 0)
    state = read_state(StatusModel(min_count=5).fit(x, labels).save(tmp_path / "good.npz"))
    path = tmp_path / "bad.npz"
    path.write_bytes(pickle.dumps(state))  # an earlier release's pickle
    with pytest.raises(ValueError, match=r"not a saved status model.*pretrain_ml_status_model"):
        StatusModel.load(path)
    with pytest.raises(ValueError, match="not a saved status model"):
        StatusModel.load(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match=f"format 1, this code reads {FORMAT_VERSION}"):
        StatusModel.load(ARTIFACTS["v2"])  # a world model, not a status model
    write_state({**state, "version": 1}, path)
    with pytest.raises(ValueError, match="status model format 1"):
        StatusModel.load(path)
    write_state({**state, "program_feature_names": PROGRAM_FEATURE_NAMES[:3]}, path)
    with pytest.raises(ValueError, match="other program features"):
        StatusModel.load(path)
    write_state({**state, "labels": state["labels"][:2]}, path)
    with pytest.raises(ValueError, match="inconsistent status model"):
        StatusModel.load(path)
    write_state({**state, "classifier": state["classifier"].scores[0]}, path)
    with pytest.raises(ValueError, match="inconsistent status model"):
        StatusModel.load(path)
    write_state({**state, "classifier": None}, path)
    with pytest.raises(ValueError, match="inconsistent status model"):
        StatusModel.load(path)
    with pytest.raises(RuntimeError, match="not fitted"):
        StatusModel().save(tmp_path / "unfitted.npz")
    assert not (tmp_path / "unfitted.npz").exists()
