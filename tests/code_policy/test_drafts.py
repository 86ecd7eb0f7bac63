"""Program drafts: the grid's 72 programs render byte-identical to the suite's (so the table
replays them), recombinations render runnable code outside it, and the corpus draw is what
it says."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.code_policy import (
    PREPROCESSING_ORDERS,
    ProgramDraft,
    bc_pairs,
    model_arguments,
    parses,
    render_draft,
    sample_draft,
    task_prompt,
)
from wmrl_env.envs.ml_tasks import all_programs, render_program

KINDS = ("binary", "multiclass", "regression")


@pytest.mark.parametrize("kind", KINDS)
def test_every_grid_program_renders_exactly_as_the_suite_does(kind) -> None:
    for spec in all_programs():
        draft = ProgramDraft.from_spec(spec, kind)
        assert draft.grid_spec(kind) == spec
        assert render_draft(draft, kind) == render_program(spec, kind)
        assert draft.arguments in model_arguments(spec.model, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_recombinations_are_valid_python_outside_the_grid(kind) -> None:
    grid = {render_program(spec, kind) for spec in all_programs()}
    for steps in PREPROCESSING_ORDERS[4:]:
        for model in ("linear", "forest", "svm"):
            draft = ProgramDraft(steps, model, model_arguments(model, kind)[-1])
            text = render_draft(draft, kind)
            assert parses(text) and text not in grid and draft.grid_spec(kind) is None
            assert "custom capacity" in text and "make_pipeline(" in text
            assert f"({draft.arguments}),\n)\nmodel.fit(X_train, y_train)\n" in text
            imports = [line for line in text.splitlines() if line.startswith("from sklearn.")]
            assert len(imports) == len(set(steps)) + 2  # one per step kind, pipeline, model


def test_sample_draft_mixes_grid_and_recombinations_at_the_asked_share() -> None:
    rng = np.random.default_rng(0)
    drafts = [sample_draft(rng, "binary", grid_share=0.5) for _ in range(2000)]
    share = np.mean([d.grid_spec("binary") is not None for d in drafts])
    # grid draws (0.5) plus wider draws that land on the grid by chance (~0.5 * 4/11 * ~0.5);
    # binomial std of a share over 2000 draws ~0.011: 4 std either side
    assert 0.55 < share < 0.70
    assert len({render_draft(d, "binary") for d in drafts}) > 300
    assert all(sample_draft(rng, "regression", 1.0).grid_spec("regression") for _ in range(50))


def test_bad_drafts_and_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown steps"):
        ProgramDraft(("impute", "whiten"), "knn", "n_neighbors=3")
    with pytest.raises(ValueError, match="model must be one of"):
        model_arguments("mlp", "binary")
    with pytest.raises(ValueError, match="grid_share"):
        sample_draft(np.random.default_rng(0), "binary", grid_share=1.5)
    with pytest.raises(ValueError, match="kind must be"):
        render_draft(ProgramDraft(("scale",), "knn", "n_neighbors=5"), "ranking")


def test_bc_pairs_prompt_each_task_with_programs_of_its_kind() -> None:
    pairs = bc_pairs(["diabetes", "wine"], per_task=20, seed=1)
    assert [p for p, _ in pairs] == [task_prompt("diabetes")] * 20 + [task_prompt("wine")] * 20
    assert all("Regressor(" in c or "Ridge(" in c or "SVR(" in c for _, c in pairs[:20])
    assert all("y_train.astype(int)" in c for _, c in pairs[20:])
    assert pairs == bc_pairs(["diabetes", "wine"], per_task=20, seed=1)
