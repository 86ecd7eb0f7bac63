"""The artifact format of world models v2 and v3 (ArtifactFormat): the committed artifacts,
written before the format was shared, load and save again to the same keys and the same
model; files from elsewhere are refused with the command that rebuilds them."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from ml_table import table_inputs

from wmrl_env.envs.ml_tasks.features import context_features
from wmrl_env.world_models import ProgramProfileWorldModel, ProgramTaskWorldModel
from wmrl_env.world_models.ml_default import ARTIFACTS
from wmrl_env.world_models.pretraining import ArtifactFormat

MODELS = {"v2": ProgramTaskWorldModel, "v3": ProgramProfileWorldModel}
# the keys of each format on disk, as the code before ArtifactFormat wrote them
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


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_a_committed_artifact_loads_and_saves_to_the_same_format(version, tmp_path):
    committed = pickle.loads(ARTIFACTS[version].read_bytes())
    assert set(committed) == KEYS[version]
    model = MODELS[version].load(ARTIFACTS[version], context_features)
    resaved = pickle.loads(model.save(tmp_path / "again.pkl").read_bytes())
    assert set(resaved) == KEYS[version]
    for key, value in committed.items():
        if isinstance(value, (int, float, str, tuple, dict, np.ndarray)) or value is None:
            np.testing.assert_equal(resaved[key], value, err_msg=key)
    # the boosters, covariance and prior: the same model, to the bit
    contexts, programs, _ = table_inputs(40)
    expected = model.predict(contexts, programs)
    again = (
        MODELS[version].load(tmp_path / "again.pkl", context_features).predict(contexts, programs)
    )
    np.testing.assert_array_equal(again.scores, expected.scores)
    np.testing.assert_array_equal(again.std, expected.std)
    np.testing.assert_array_equal(again.valid, expected.valid)


def test_an_artifact_of_other_features_or_another_scikit_learn_is_refused(tmp_path):
    state = pickle.loads(ARTIFACTS["v2"].read_bytes())
    path = tmp_path / "other.pkl"
    path.write_bytes(pickle.dumps({**state, "program_feature_names": ("lines",)}))
    with pytest.raises(ValueError, match="other program features"):
        ProgramTaskWorldModel.load(path, context_features)
    path.write_bytes(pickle.dumps({**state, "sklearn": "0.1.0"}))
    with pytest.raises(ValueError, match="--backend program"):
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
        seeded.load(dict, tmp_path / "unread.pkl", None, max_anchors=3)
