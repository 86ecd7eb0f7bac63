"""The artifact format of world models v2 and v3 (ArtifactFormat): the committed artifacts are
``.npz`` files (no pickle) that load under any scikit-learn and save again to the same keys
and the same model; an earlier release's pickles still load under their own scikit-learn;
files from elsewhere are refused with the command that rebuilds them."""

from __future__ import annotations

import dataclasses
import json
import pickle

import numpy as np
import pytest
import sklearn
from ml_table import table_inputs
from sklearn.ensemble import HistGradientBoostingRegressor

from wmrl_env.envs.ml_tasks.features import context_features
from wmrl_env.world_models import ProgramProfileWorldModel, ProgramTaskWorldModel
from wmrl_env.world_models.artifact_file import read_state, write_state
from wmrl_env.world_models.programs.ml_default import ARTIFACTS, load_ml_world_model
from wmrl_env.world_models.programs.pretraining import ArtifactFormat
from wmrl_env.world_models.programs.tree_ensemble import TreeEnsemble

MODELS = {"v2": ProgramTaskWorldModel, "v3": ProgramProfileWorldModel}
# the keys of each format, as the code before ArtifactFormat wrote them
KEYS = {
    "v2": {
        "version", "sklearn", "program_feature_names", "task_feature_names", "score_range",
        "max_anchors_per_task", "max_tasks", "seed", "booster", "shape", "shape_weight",
        "spread", "spread_floor", "program_mean", "program_scale", "prior", "std_scale",
        "fallback_score",
    },
    "v3": {
        "version", "sklearn", "program_feature_names", "task_feature_names", "labels", "grid",
        "grid_attributes", "score_range", "max_programs_per_task", "max_tasks", "seed",
        "bandwidth", "covariance", "covariance_source", "shrinkage", "noise_share",
        "std_scale", "variance_floor", "fallback_score", "_level", "_spread", "_spread_floor",
        "_program_mean", "_program_scale", "_grid_space", "_grid_label",
    },
}  # fmt: skip
BOOSTERS = {"v2": ("booster", "shape", "spread"), "v3": ("_level", "_spread")}


def same_predictions(a, b, contexts, programs) -> None:
    expected, got = a.predict(contexts, programs), b.predict(contexts, programs)
    np.testing.assert_array_equal(got.scores, expected.scores)
    np.testing.assert_array_equal(got.std, expected.std)
    np.testing.assert_array_equal(got.valid, expected.valid)


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_a_committed_artifact_is_numpy_data_and_saves_to_the_same_format(version, tmp_path):
    with np.load(ARTIFACTS[version], allow_pickle=False) as stored:  # no pickle inside
        header = json.loads(str(stored["header"]))
        assert all(stored[name].dtype != object for name in stored.files)
    assert set(header["state"]) == KEYS[version]
    committed = read_state(ARTIFACTS[version])
    assert all(isinstance(committed[key], TreeEnsemble) for key in BOOSTERS[version])
    model = MODELS[version].load(ARTIFACTS[version], context_features)
    resaved = read_state(model.save(tmp_path / "again.npz"))
    assert set(resaved) == KEYS[version]
    for key, value in committed.items():
        if key == "sklearn":
            continue
        if dataclasses.is_dataclass(value):  # the boosters, covariance and prior
            assert type(resaved[key]) is type(value)
            resaved[key], value = vars(resaved[key]), vars(value)
        np.testing.assert_equal(resaved[key], value, err_msg=key)
    contexts, programs, _ = table_inputs(40)
    again = MODELS[version].load(tmp_path / "again.npz", context_features)
    same_predictions(model, again, contexts, programs)


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_a_committed_artifact_loads_under_another_scikit_learn(version, monkeypatch):
    contexts, programs, scores = table_inputs(40)
    expected = load_ml_world_model(version)
    monkeypatch.setattr(sklearn, "__version__", "1.3.0")
    loaded = load_ml_world_model(version)
    same_predictions(expected, loaded, contexts, programs)
    for model in (expected, loaded):
        model.update(contexts[:8], programs[:8], scores[:8])
    same_predictions(expected, loaded, contexts, programs)


def test_an_earlier_pickle_loads_under_its_scikit_learn_and_is_refused_under_another(tmp_path):
    state = read_state(ARTIFACTS["v2"])
    rows = np.random.default_rng(0).normal(size=(300, state["booster"].n_features))
    rows[::5, 3] = np.nan
    fitted = HistGradientBoostingRegressor(max_iter=30, random_state=0).fit(rows, rows[:, 0])
    path = tmp_path / "earlier.pkl"
    path.write_bytes(pickle.dumps({**state, "booster": fitted, "sklearn": sklearn.__version__}))
    model = ProgramTaskWorldModel.load(path, context_features)
    assert isinstance(model._booster, TreeEnsemble)
    np.testing.assert_array_equal(model._booster.predict(rows), fitted.predict(rows))
    resaved = ProgramTaskWorldModel.load(model.save(tmp_path / "now.npz"), context_features)
    np.testing.assert_array_equal(resaved._booster.predict(rows), fitted.predict(rows))
    path.write_bytes(pickle.dumps({**state, "booster": fitted, "sklearn": "0.1.0"}))
    with pytest.raises(ValueError, match=r"0\.1\.0.*--backend program"):
        ProgramTaskWorldModel.load(path, context_features)


def test_an_artifact_of_other_features_or_another_format_is_refused(tmp_path):
    state = read_state(ARTIFACTS["v2"])
    path = write_state({**state, "program_feature_names": ("lines",)}, tmp_path / "other.npz")
    with pytest.raises(ValueError, match="other program features"):
        ProgramTaskWorldModel.load(path, context_features)
    write_state({**state, "version": 0}, path)
    with pytest.raises(ValueError, match="format version 0, this code reads 1"):
        ProgramTaskWorldModel.load(path, context_features)
    path.write_bytes(pickle.dumps([state]))
    with pytest.raises(ValueError, match="format version list"):
        ProgramTaskWorldModel.load(path, context_features)


def test_a_format_must_not_save_one_key_twice_nor_take_unknown_settings(tmp_path):
    with pytest.raises(ValueError, match="overlap"):
        ArtifactFormat(1, "x", settings=("seed",), learned={"seed": "_seed"})
    with pytest.raises(ValueError, match="overlap"):
        ArtifactFormat(1, "x", settings=("version",), learned={})
    seeded = ArtifactFormat(1, "x", settings=("seed",), learned={})
    with pytest.raises(TypeError, match="not settings of this artifact: \\['max_anchors'\\]"):
        seeded.load(dict, tmp_path / "unread.npz", None, max_anchors=3)
