"""Program features read free-form programs, not only the suite's rendered ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.programs import ProgramSpec, all_programs, render_program
from wmrl_env.world_models.programs.program_features import (
    PROGRAM_FEATURE_NAMES,
    ProgramFeaturizer,
    code_key,
    program_features,
    value,
)

PANDAS_EXTRA_TREES = """
import pandas as pd
from sklearn.ensemble import ExtraTreesRegressor

train = pd.read_csv("inputs/train.csv").fillna(0)
test = pd.read_csv("inputs/test.csv").fillna(0)
features = [c for c in train.columns if c not in ("id", "target")]
model = ExtraTreesRegressor(n_estimators=500, max_depth=None, random_state=1)
model.fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "prediction": model.predict(test[features])}).to_csv(
    "predictions.csv", index=False
)
"""

GRADIENT_BOOSTING_SEARCH = """
import numpy as np
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.decomposition import PCA
from sklearn.pipeline import Pipeline
data = np.loadtxt("inputs/train.csv", delimiter=",", skiprows=1)
pipe = Pipeline([("pca", PCA(5)), ("gb", GradientBoostingClassifier(learning_rate=0.3,
                                                                    n_estimators=80))])
search = GridSearchCV(pipe, {"gb__max_depth": [2, 3]}).fit(data[:, 1:-1], data[:, -1])
"""

LOG_AFTER_IMPUTE = """
import numpy as np
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import FunctionTransformer
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
model = make_pipeline(SimpleImputer(), FunctionTransformer(np.log1p), KNeighborsClassifier(7))
"""


def test_every_rendered_program_parses_and_the_space_is_told_apart():
    texts = [render_program(s, k) for s in all_programs() for k in ("binary", "regression")]
    rows = np.array([program_features(t) for t in texts])
    assert rows.shape == (len(texts), len(PROGRAM_FEATURE_NAMES))
    assert len(np.unique(rows, axis=0)) == len(texts)  # no two programs look the same


def test_rendered_program_is_read_correctly():
    x = program_features(render_program(ProgramSpec("log1p", "svm", "high"), "binary"))
    assert value(x, "family_svm") == 1.0 and value(x, "is_classifier") == 1.0
    assert value(x, "log_C") == 2.0  # C=100.0
    assert value(x, "log1p") == 1.0 and value(x, "log1p_before_impute") == 1.0
    assert value(x, "imputes") == 0.0 and value(x, "scales") == 1.0
    assert value(x, "decision_function") == 1.0 and value(x, "reads_numpy") == 1.0
    poly = program_features(render_program(ProgramSpec("poly2", "knn", "low"), "regression"))
    assert value(poly, "poly_degree") == 2.0 and value(poly, "log_n_neighbors") == pytest.approx(
        math.log10(50), abs=1e-3
    )
    assert value(poly, "is_regressor") == 1.0 and value(poly, "imputes") == 1.0


def test_pandas_program_with_an_estimator_outside_the_space():
    x = program_features(PANDAS_EXTRA_TREES)
    assert value(x, "family_forest") == 1.0 and value(x, "is_regressor") == 1.0
    assert value(x, "log_n_estimators") == pytest.approx(math.log10(500), abs=1e-3)
    assert value(x, "max_depth_unbounded") == 1.0  # max_depth=None
    assert value(x, "reads_pandas") == 1.0 and value(x, "reads_numpy") == 0.0
    assert value(x, "imputes") == 1.0  # fillna
    assert value(x, "writes_predictions") == 1.0 and value(x, "predict") == 1.0


def test_pipeline_search_and_positional_hyperparameters():
    x = program_features(GRADIENT_BOOSTING_SEARCH)
    assert value(x, "family_boosting") == 1.0 and value(x, "log_learning_rate") == pytest.approx(
        math.log10(0.3), abs=1e-3
    )
    assert value(x, "pca") == 1.0 and value(x, "search") == 1.0
    assert value(x, "writes_predictions") == 0.0  # it never writes predictions.csv
    knn = program_features(LOG_AFTER_IMPUTE)
    assert value(knn, "log_n_neighbors") == pytest.approx(math.log10(7), abs=1e-3)
    assert value(knn, "log1p") == 1.0 and value(knn, "log1p_before_impute") == 0.0


def test_unknown_estimators_differ_through_the_name_hash():
    a = program_features("from mylib import FancyModel\nm = FancyModel(depth=3)\n")
    b = program_features("from mylib import OtherModel\nm = OtherModel(depth=3)\n")
    assert value(a, "family_unknown") == 1.0 and not np.array_equal(a, b)


@pytest.mark.parametrize("bad", ["def f(:\n", "x = = 1", "print('a'\n", "a\x00b"])
def test_unparseable_programs_give_none(bad):
    assert program_features(bad) is None


def test_featurizer_caches_by_text():
    featurize = ProgramFeaturizer(max_entries=2)
    first = featurize(["x = 1", "y = 2", "x = 1"])
    assert featurize.hits == 1 and first[0] is first[2]
    featurize(["z = 3"])  # evicts the least recently used ("y = 2")
    featurize(["y = 2"])
    assert featurize.hits == 1
    with pytest.raises(ValueError):
        ProgramFeaturizer(max_entries=0)


def test_a_program_that_differs_only_in_comment_lines_is_not_parsed_again(monkeypatch):
    import wmrl_env.world_models.programs.program_features as module

    parsed = []
    original = module.program_features
    monkeypatch.setattr(module, "program_features", lambda p: parsed.append(p) or original(p))
    featurize = ProgramFeaturizer()
    base = "from sklearn.svm import SVC\nm = SVC(C=2.0)\n"
    commented = "# sample 7\n" + base.replace("\n", "  \n\n") + "# the end\n"
    inline = base + "x = 1  # an inline comment is part of a code line\n"
    quoted = base + "s = '''\n# inside a string\n'''\n"
    first, second, _, _ = featurize([base, commented, inline, quoted])
    assert parsed == [base, inline, quoted] and featurize.code_hits == 1
    lines = PROGRAM_FEATURE_NAMES.index("log_lines")
    assert second[lines] == original(commented)[lines] != first[lines]
    np.testing.assert_array_equal(np.delete(second, lines), np.delete(original(commented), lines))
    assert featurize(["def f(:"])[0] is None and featurize(["# broken\ndef f(:"])[0] is None
    assert featurize.code_hits == 2 and code_key("def f(:") == code_key("def f(:\n# c")
    documented = '"""A docstring."""\n' + base
    featurize([documented, documented + "# sample 8\n", quoted + "\n# outside\n"])
    assert parsed[4:] == [documented] and featurize.code_hits == 4
    assert code_key('"""a"""  # b\n' + base) is None  # a comment beside a triple quote


def test_the_estimator_table_agrees_with_scikit_learns_own_tags():
    from sklearn.base import is_classifier, is_regressor
    from sklearn.utils import all_estimators

    from wmrl_env.world_models.programs.program_features import ESTIMATORS

    classes = dict(all_estimators(type_filter=["classifier", "regressor"]))
    assert {name for name in ESTIMATORS if name not in classes} == set()
    for name, (_, role) in ESTIMATORS.items():
        estimator = classes[name]()  # the tags are read from an instance
        tagged = is_classifier(estimator) if role == "classifier" else is_regressor(estimator)
        assert tagged, (name, role)


NOT_IN_THE_GRID = {
    # estimators the 72-program grid never uses; the old name heuristic called every one of
    # these a regressor, so "a regressor on a classification task" predicted failure
    "GaussianNB": "classifier",
    "BernoulliNB": "classifier",
    "MultinomialNB": "classifier",
    "Perceptron": "classifier",
    "LinearDiscriminantAnalysis": "classifier",
    "QuadraticDiscriminantAnalysis": "classifier",
    "NearestCentroid": "classifier",
    "KernelRidge": "regressor",
    "TheilSenRegressor": "regressor",
    "LassoLars": "regressor",
}


@pytest.mark.parametrize("name", sorted(NOT_IN_THE_GRID))
def test_hand_written_programs_with_estimators_outside_the_grid(name):
    program = (
        "import numpy as np\n"
        f"from sklearn.somewhere import {name}\n"
        'train = np.genfromtxt("inputs/train.csv", delimiter=",", skip_header=1)\n'
        f"model = {name}().fit(train[:, 1:-1], train[:, -1])\n"
        'np.savetxt("predictions.csv", model.predict(train[:, 1:-1]))\n'
    )
    x = program_features(program)
    role = NOT_IN_THE_GRID[name]
    assert value(x, "is_classifier") == float(role == "classifier")
    assert value(x, "is_regressor") == float(role == "regressor")
    assert value(x, "family_unknown") == 0.0


def test_unknown_estimators_fall_back_to_their_suffix():
    from wmrl_env.world_models.programs.program_features import estimator_role

    assert estimator_role("XGBClassifier") == "classifier"
    assert estimator_role("LGBMRegressor") == "regressor"
    assert estimator_role("MyModel") is None
