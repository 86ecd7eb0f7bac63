"""World model v3 (ProgramProfileWorldModel): contract, learning a task from a few anchors
through the program covariance, std coverage with uniform and on-policy anchors, merged
duplicates, programs off the grid, state round trip, persistence and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from ml_table import table_inputs
from scipy.stats import spearmanr

from wmrl_env.envs.ml_tasks import get_task
from wmrl_env.envs.ml_tasks.programs import ProgramSpec, all_programs, render_program
from wmrl_env.testing import WorldModelContract
from wmrl_env.world_models import ProgramProfileWorldModel, load_default_ml_world_model
from wmrl_env.world_models.base import as_prediction
from wmrl_env.world_models.programs.program_profile import on_policy_draw


class TestProgramProfileContract(WorldModelContract):
    score_range = (0.0, 1.0)

    def make_world_model(self):
        return load_default_ml_world_model()

    def make_inputs(self, n):
        return table_inputs(n)


# --------------------------------------------------------------------- synthetic truth
# Tasks are random 3-number vectors the model sees; a program's true score depends on its
# family and capacity through them (learnable zero-shot), plus per task a hidden effect per
# family and a hidden capacity slope (what anchors must teach: every program of a family
# moves together, which is the covariance v3 learns) and Gaussian noise of known size.
FAMILIES = ("linear", "knn", "tree", "forest", "boosting", "svm")
SPECS = [s for s in all_programs() if s.preprocessing in ("standardize", "poly2")]
NOISE = 0.02


def synthetic_world(n_tasks: int, seed: int):
    rng = np.random.default_rng(seed)
    vectors, contexts, programs, scores = {}, [], [], []
    for t in range(n_tasks):
        context = f"synthetic task {seed}-{t}"
        vectors[context] = rng.normal(size=3)
        hidden = rng.normal(scale=0.12, size=len(FAMILIES))
        slope = rng.normal(scale=0.05)
        for spec in SPECS:
            family = FAMILIES.index(spec.model)
            capacity = ("low", "mid", "high").index(spec.capacity) - 1
            signal = 0.12 * vectors[context][family % 3] * (1 if family < 3 else -1)
            signal += hidden[family] + slope * capacity
            contexts.append(context)
            programs.append(render_program(spec, "regression"))
            scores.append(0.5 + signal + rng.normal(scale=NOISE))
    return vectors, contexts, programs, np.clip(np.array(scores), 0.0, 1.0)


def synthetic_grid():
    grid = {s.id: [render_program(s, "regression")] for s in SPECS}
    return grid, {s.id: (s.preprocessing, s.model, s.capacity) for s in SPECS}


@pytest.fixture(scope="module")
def synthetic_model():
    train_vectors, contexts, programs, scores = synthetic_world(40, seed=0)
    test_vectors, *heldout = synthetic_world(12, seed=1)
    vectors = {**train_vectors, **test_vectors}
    grid, attributes = synthetic_grid()
    model = ProgramProfileWorldModel(vectors.__getitem__, ("a", "b", "c"), grid, attributes)
    return model.fit(contexts, programs, scores), heldout


def per_task(contexts, fn):
    contexts = np.array(contexts, dtype=object)
    return [fn(np.flatnonzero(contexts == c)) for c in dict.fromkeys(contexts)]


def test_sixteen_anchors_teach_the_task(synthetic_model):
    model, (contexts, programs, real) = synthetic_model
    rng = np.random.default_rng(2)
    before, after, std_before, std_after = [], [], [], []

    def run(members):
        model.reset_task()
        order = rng.permutation(members)
        anchors, rest = order[:16], order[16:]
        zero = model.predict([contexts[i] for i in rest], [programs[i] for i in rest])
        model.update([contexts[i] for i in anchors], [programs[i] for i in anchors], real[anchors])
        learned = model.predict([contexts[i] for i in rest], [programs[i] for i in rest])
        before.append(spearmanr(zero.scores, real[rest]).statistic)
        after.append(spearmanr(learned.scores, real[rest]).statistic)
        std_before.append(zero.std.mean())
        std_after.append(learned.std.mean())

    per_task(contexts, run)
    gain = np.array(after) - np.array(before)
    # 12 tasks: the mean gain must clear 3 standard errors of its own spread
    assert gain.mean() > 3 * gain.std(ddof=1) / np.sqrt(len(gain)), (before, after)
    # 16 random anchors of 36 leave a family unseen with probability (5/6)^16 = 5 %, so
    # they pin the hidden family effects: what is left is the capacity slope (learned
    # from fewer pairs) and the noise (0.02 against a spread of about 0.15)
    assert np.mean(after) > 0.85, after
    assert np.all(np.array(std_after) < np.array(std_before))


@pytest.mark.parametrize("policy", ["zero-shot", "uniform", "on_policy"])
def test_std_covers_held_out_tasks_at_nominal_rates(synthetic_model, policy):
    model, (contexts, programs, real) = synthetic_model
    rng = np.random.default_rng(3)
    z = []

    def run(members):
        model.reset_task()
        if policy == "uniform":
            anchors = rng.permutation(members)[:16]
        elif policy == "on_policy":
            anchors = members[on_policy_draw(real[members], 16, rng)]
        else:
            anchors = members[:0]
        if len(anchors):
            model.update(
                [contexts[i] for i in anchors], [programs[i] for i in anchors], real[anchors]
            )
        rest = np.setdiff1d(members, anchors)
        p = model.predict([contexts[i] for i in rest], [programs[i] for i in rest])
        z.append(np.abs(p.scores - real[rest]) / p.std)

    per_task(contexts, run)
    for level, width in ((0.683, 1.0), (0.954, 1.96)):
        # coverage is correlated within a task: the error bar is 3 standard errors of the
        # spread across the 12 tasks, plus the scale's own error: it is fitted on 40
        # training tasks' out-of-fold residuals, and one scale (and floor) is shared by every
        # regime, whose coverages differ by a few points
        covered = np.array([np.mean(task <= width) for task in z])
        error = 3 * covered.std(ddof=1) / np.sqrt(len(covered)) + 0.03
        assert abs(covered.mean() - level) < error, (level, covered.mean(), error)


def test_the_std_scale_is_what_it_was_before_the_coverage_scale_was_shared(synthetic_model):
    # fitted at 5f8b0f9 (scikit-learn 1.9), before v2, v3 and ConformalStd shared
    # coverage_scale: the boosting is seeded and single-threaded, so only another
    # scikit-learn (which the saved artifacts refuse too) may move it
    model, _ = synthetic_model
    assert model.std_scale == pytest.approx(0.9882056774841067, rel=1e-12)
    assert model.variance_floor == 0.0


def test_too_few_tasks_for_the_covariance_fall_back_to_the_feature_kernel():
    # every pretraining task ran the same half of the grid (the 18 "standardize" programs),
    # as the `wm` split ran the same 20 of 72: the covariance of the other half cannot be
    # learned, so v3 uses v2's kernel over program features, and anchors on the programs
    # the table knows still teach the family effects of the ones it never ran
    train_vectors, contexts, programs, scores = synthetic_world(40, seed=0)
    known = [i for i in range(len(programs)) if SPECS[i % len(SPECS)].preprocessing != "poly2"]
    test_vectors, *heldout = synthetic_world(12, seed=1)
    vectors = {**train_vectors, **test_vectors}
    grid, attributes = synthetic_grid()
    model = ProgramProfileWorldModel(vectors.__getitem__, ("a", "b", "c"), grid, attributes)
    model.fit([contexts[i] for i in known], [programs[i] for i in known], scores[known])
    assert model.covariance_source == "features"
    # as fitted at 5f8b0f9, before coverage_scale was shared (a floor above 0 chosen)
    assert model.std_scale == pytest.approx(1.4082667561963573, rel=1e-12)
    assert model.variance_floor == 0.03
    h_contexts, h_programs, real = heldout
    rng = np.random.default_rng(4)
    gains = []

    def run(members):
        model.reset_task()
        poly2 = np.array([SPECS[i % len(SPECS)].preprocessing == "poly2" for i in members])
        seen, unseen = members[~poly2], members[poly2]
        task = [h_contexts[members[0]]] * len(unseen)
        zero = model.predict(task, [h_programs[i] for i in unseen]).scores
        anchors = rng.permutation(seen)[:16]
        model.update(
            [h_contexts[i] for i in anchors], [h_programs[i] for i in anchors], real[anchors]
        )
        learned = model.predict(task, [h_programs[i] for i in unseen]).scores
        gains.append(
            spearmanr(learned, real[unseen]).statistic - spearmanr(zero, real[unseen]).statistic
        )

    per_task(h_contexts, run)
    gains = np.array(gains)
    # 12 tasks: the mean gain on programs no pretraining task ran must clear 3 standard
    # errors of its spread (the table's covariance of them is unknown: it teaches nothing)
    assert gains.mean() > 3 * gains.std(ddof=1) / np.sqrt(len(gains)), gains


def test_repeated_programs_are_merged_and_keep_the_diverse_ones(synthetic_model, tmp_path):
    model, (contexts, programs, real) = synthetic_model
    path = model.save(tmp_path / "synthetic.pkl")
    small = ProgramProfileWorldModel.load(path, model.task_featurizer, max_programs_per_task=5)
    task = contexts[0]
    first = [i for i, c in enumerate(contexts) if c == task][:5]
    small.update([task] * 5, [programs[i] for i in first], real[first])
    small.update([task] * 50, [programs[first[0]]] * 50, np.full(50, real[first[0]]))
    (entry,) = small.state_dict()["tasks"]
    assert len(entry["programs"]) == 5  # a converged policy's repeats evict nothing
    assert entry["counts"].tolist() == [1, 1, 1, 1, 51]  # most recently executed last
    assert small.n_anchors(task) == 55
    # the repeats narrow that program's std, not the others'
    once = ProgramProfileWorldModel.load(path, model.task_featurizer)
    once.update([task] * 5, [programs[i] for i in first], real[first])
    narrow = small.predict([task], [programs[first[0]]]).std[0]
    assert narrow < once.predict([task], [programs[first[0]]]).std[0]


def test_load_keeps_the_memory_bounds_it_is_given(synthetic_model, tmp_path):
    model, (contexts, programs, real) = synthetic_model
    path = model.save(tmp_path / "synthetic.pkl")
    small = ProgramProfileWorldModel.load(
        path, model.task_featurizer, max_programs_per_task=2, max_tasks=1
    )
    assert (small.max_programs_per_task, small.max_tasks) == (2, 1)
    tasks = list(dict.fromkeys(contexts))[:2]
    for task in tasks:
        members = [i for i, c in enumerate(contexts) if c == task][:3]  # 3 distinct programs
        small.update([task] * 3, [programs[i] for i in members], real[members])
    assert small.n_anchors(tasks[0]) == 0  # the least recently updated task evicted
    assert small.n_anchors(tasks[1]) == 2  # the least recently executed program evicted
    same = ProgramProfileWorldModel.load(path, model.task_featurizer)
    assert (same.max_programs_per_task, same.max_tasks) == (256, 64)  # the saved bounds
    with pytest.raises(ValueError, match="at least 1"):  # refused, not ignored
        ProgramProfileWorldModel.load(path, model.task_featurizer, max_programs_per_task=0)


def test_a_grid_program_with_other_comments_sits_on_the_grid():
    model = load_default_ml_world_model()
    wine = get_task("wine").description
    program = render_program(ProgramSpec("standardize", "forest", "mid"), "multiclass")
    texts = [program, program + "# tuned by hand\n"]
    rows, _ = model.rows([wine] * 2, texts)
    weights, share = model._placement(rows, ["plain", "commented"])
    assert share.tolist() == [0.0, 0.0]
    label = model.labels.index("standardize-forest-mid")
    assert weights[0, label] == weights[1, label] == 1.0


OFF_GRID = {
    "gaussian_nb": ("LogisticRegression(C=1.0, max_iter=1000)", "GaussianNB()"),
    "extra_trees": ("LogisticRegression(C=1.0, max_iter=1000)", "ExtraTreesClassifier(300)"),
    "perceptron": ("LogisticRegression(C=1.0, max_iter=1000)", "Perceptron()"),
}


def test_programs_off_the_grid_get_a_prior_from_their_nearest_grid_programs():
    model = load_default_ml_world_model()
    wine = get_task("wine").description
    grid = render_program(ProgramSpec("standardize", "linear", "mid"), "multiclass")
    texts = [grid] + [grid.replace(old, new) for old, new in OFF_GRID.values()]
    p = as_prediction(model.predict([wine] * len(texts), texts), len(texts), (0.0, 1.0))
    assert p.valid.all(), p.reasons
    rows, _ = model.rows([wine] * len(texts), texts)
    weights, share = model._placement(rows, [f"k{i}" for i in range(len(texts))])
    assert share[0] == 0.0 and weights[0].max() == 1.0  # on the grid: itself
    assert (share[1:] > 0).all() and (weights[1:].max(axis=1) < 1.0).all()
    # anchors on the grid program move its off-grid neighbours too
    model.update([wine], [grid], [0.05])
    moved = model.predict([wine] * len(texts), texts).scores
    assert (moved[1:] < p.scores[1:]).all()


def test_state_dict_round_trip_is_bit_identical(tmp_path):
    contexts, programs, real = table_inputs(40)
    model = load_default_ml_world_model()
    model.update(
        contexts[:24] + contexts[:3], programs[:24] + programs[:3], np.r_[real[:24], 0.5, 0.5, 0.5]
    )
    expected = model.predict(contexts, programs)
    fresh = load_default_ml_world_model()
    fresh.load_state_dict(model.state_dict())
    got = fresh.predict(contexts, programs)
    np.testing.assert_array_equal(got.scores, expected.scores)
    np.testing.assert_array_equal(got.std, expected.std)
    saved = ProgramProfileWorldModel.load(model.save(tmp_path / "wm.pkl"), model.task_featurizer)
    saved.load_state_dict(model.state_dict())
    np.testing.assert_array_equal(saved.predict(contexts, programs).scores, expected.scores)
    with pytest.raises(ValueError, match="version"):
        fresh.load_state_dict({**model.state_dict(), "version": 0})


def test_a_file_of_another_version_is_refused(tmp_path):
    import pickle

    path = tmp_path / "old.pkl"
    path.write_bytes(pickle.dumps({"version": 0}))
    with pytest.raises(ValueError, match="format version 0"):
        ProgramProfileWorldModel.load(path, lambda c: np.zeros(3))
    with pytest.raises(FileNotFoundError, match="train-world-model"):
        load_default_ml_world_model(tmp_path / "missing.pkl")


def test_bad_input_raises_and_changes_nothing():
    contexts, programs, real = table_inputs(4)
    model = load_default_ml_world_model()
    with pytest.raises(ValueError, match="finite"):
        model.update(contexts, programs, np.array([0.1, np.inf, 0.2, 0.3]))
    with pytest.raises(ValueError, match="outside score_range"):
        model.update(contexts, programs, np.array([0.1, 1.5, 0.2, 0.3]))
    with pytest.raises(ValueError, match="real scores"):
        model.update(contexts, programs, real[:3])
    assert model.state_dict()["tasks"] == []
    model.update(contexts, programs, np.array([np.nan] * 4))  # failed executions: skipped
    assert model.state_dict()["tasks"] == []
    grid, _ = synthetic_grid()
    unfitted = ProgramProfileWorldModel(lambda c: np.zeros(2), ("a", "b"), grid)
    with pytest.raises(RuntimeError, match="not fitted"):
        unfitted.predict(contexts, programs)
    with pytest.raises(ValueError, match="at least 8 tasks"):
        unfitted.fit(["one task"] * 3, programs[:3], real[:3])
    with pytest.raises(ValueError, match="valid Python"):
        ProgramProfileWorldModel(
            lambda c: np.zeros(2), ("a", "b"), {"a": ["x = 1"], "b": ["def f(:"]}
        )._fit_grid()
