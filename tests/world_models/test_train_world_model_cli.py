"""``wmrl train-world-model`` and the execution-log reader it uses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wmrl_env.cli.main import main
from wmrl_env.executors.base import ExecResult
from wmrl_env.store import ExecutionLog
from wmrl_env.world_models.training_data import read_training_pairs

DESCRIPTIONS = {"sort": "Sort a list.", "sum": "Sum a list."}


def write_execution_log(path) -> None:
    """A real wmrl_env.store log: 12 scored executions and one crash."""
    with ExecutionLog(path) as log:
        for i in range(12):
            task = "sort" if i % 2 else "sum"
            good = i % 3 != 0
            result = ExecResult(job_id=f"j{i}", status="ok", score=0.9 if good else 0.1)
            log.record(result, artifact=("sorted(x)" if good else "x") + f"  # {i}", task_id=task)
        log.record(ExecResult(job_id="crash", status="crashed", message="boom"), artifact="1/0")


def test_reads_the_store_log_with_task_descriptions(tmp_path) -> None:
    write_execution_log(tmp_path / "log.sqlite")
    pairs = read_training_pairs(tmp_path / "log.sqlite", contexts=DESCRIPTIONS)
    assert len(pairs) == 12 and pairs.n_skipped == 1
    assert set(pairs.contexts) == set(DESCRIPTIONS.values())
    assert set(pairs.groups) == {"sort", "sum"}
    np.testing.assert_allclose(sorted(set(pairs.scores)), [0.1, 0.9])
    without = read_training_pairs(tmp_path / "log.sqlite")
    assert set(without.contexts) == {"sort", "sum"}  # the task id stands in for the context


def test_reader_errors_name_the_problem(tmp_path) -> None:
    write_execution_log(tmp_path / "log.sqlite")
    with pytest.raises(ValueError, match="no context given for task_id"):
        read_training_pairs(tmp_path / "log.sqlite", contexts={"sort": "Sort."})
    with pytest.raises(ValueError, match="no table 'runs'"):
        read_training_pairs(tmp_path / "log.sqlite", table="runs")
    (tmp_path / "bad.csv").write_text("context,artifact,score\nt,x,high\n")
    with pytest.raises(ValueError, match="not a number"):
        read_training_pairs(tmp_path / "bad.csv")
    (tmp_path / "cols.csv").write_text("prompt,completion\nt,x\n")
    with pytest.raises(ValueError, match="needs 'artifact' and 'score'"):
        read_training_pairs(tmp_path / "cols.csv")
    with pytest.raises(FileNotFoundError):
        read_training_pairs(tmp_path / "missing.csv")


@pytest.mark.transformers
@pytest.mark.slow
def test_causal_lm_command_fine_tunes_and_saves(tmp_path, tiny_lm_dir, capsys) -> None:
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer

    write_execution_log(tmp_path / "log.sqlite")
    (tmp_path / "tasks.json").write_text(json.dumps(DESCRIPTIONS))
    out = tmp_path / "wm"
    argv = ["train-world-model", str(tmp_path / "log.sqlite"), "--backend", "causal-lm"]
    argv += ["--model", tiny_lm_dir, "--contexts", str(tmp_path / "tasks.json")]
    argv += ["--out", str(out), "--epochs", "2", "--learning-rate", "0.01", "--rank", "4"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_skipped"] == 1 and summary["n_train"] + summary["n_eval"] == 12
    assert summary["eval_loss_after"] < summary["eval_loss_before"]
    scorer = CausalLMScorer.load(out, min_score_mass=0.0)
    assert scorer.model.peft_config["default"].r == 4
    assert scorer.predict(["Sort a list."], ["sorted(x)"]).valid.all()


@pytest.mark.transformers
@pytest.mark.slow
def test_embedding_command_fits_and_saves(tmp_path, capsys) -> None:
    from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor

    write_execution_log(tmp_path / "log.sqlite")
    out = tmp_path / "wm"
    argv = ["train-world-model", str(tmp_path / "log.sqlite"), "--out", str(out)]
    assert main([*argv, "--backend", "embedding", "--head", "knn", "--max-length", "64"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == {
        "backend": "embedding",
        "out": str(out),
        "n_skipped": 1,
        "head": "knn",
        "n_pairs": 12,
    }
    model = EmbeddingRegressor.load(out)
    assert model.encoder.max_length == 64
    assert model.predict(["sort"], ["sorted(x)"]).valid.all()


def test_command_reports_bad_input_without_a_traceback(tmp_path, capsys) -> None:
    (tmp_path / "one.csv").write_text("context,artifact,score\nt,x,0.5\n")
    assert main(["train-world-model", str(tmp_path / "one.csv"), "--out", str(tmp_path)]) == 2
    assert "at least 2 are needed" in capsys.readouterr().err
    (tmp_path / "two.csv").write_text("context,artifact,score\nt,x,0.5\nt,y,0.7\n")
    argv = ["train-world-model", str(tmp_path / "two.csv"), "--out", str(tmp_path)]
    assert main([*argv, "--backend", "causal-lm"]) == 2
    assert "--model is required" in capsys.readouterr().err


def test_program_command_trains_on_a_real_store_log(tmp_path, capsys) -> None:
    """World model v2 from a wmrl_env.store log of table executions of three tasks."""
    from wmrl_env.envs.ml_tasks import get_task, load_table
    from wmrl_env.world_models import load_ml_world_model

    tasks = ("iris", "diabetes", "fair")
    with ExecutionLog(tmp_path / "log.sqlite") as log:
        for task in tasks:
            for row in load_table().for_task(task)[::3]:
                result = ExecResult(
                    job_id=f"{task}-{row.program_id}",
                    status=row.status,
                    score=row.score if row.status == "ok" else None,
                )
                log.record(result, artifact=row.program(), task_id=task)
    contexts = tmp_path / "tasks.json"
    contexts.write_text(json.dumps({t: get_task(t).description for t in tasks}))
    out = tmp_path / "wm.pkl"
    code = main(
        [
            "train-world-model",
            str(tmp_path / "log.sqlite"),
            "--backend",
            "program",
            "--contexts",
            str(contexts),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_tasks"] == 3 and summary["n_pairs"] + summary["n_skipped"] == 72
    model = load_ml_world_model("v2", out)
    wine = get_task("wine")
    p = model.predict([wine.description], [load_table().for_task("wine")[0].program()])
    assert p.valid.all() and p.std[0] > 0


def test_table_split_needs_the_program_backend(tmp_path, capsys) -> None:
    argv = ["train-world-model", "--table-split", "wm", "--out", str(tmp_path / "x")]
    code = main([*argv, "--backend", "embedding"])
    assert code == 2 and "--backend profile or program" in capsys.readouterr().err
    assert main(["train-world-model", "--out", str(tmp_path / "x")]) == 2


def test_profile_command_trains_world_model_v3_on_table_tasks(tmp_path, capsys) -> None:
    """World model v3 (the default backend) from the committed table's rows of 8 tasks."""
    from wmrl_env.envs.ml_tasks import TRAIN_TASKS, get_task, load_table
    from wmrl_env.world_models import ProgramProfileWorldModel, load_default_ml_world_model

    out = tmp_path / "v3.pkl"
    tasks = ",".join(TRAIN_TASKS[:8])
    assert main(["train-world-model", "--table-tasks", tasks, "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["backend"] == "profile" and summary["n_tasks"] == 8
    assert 0.0 <= summary["shrinkage"] <= 1.0 and summary["std_scale"] > 0
    assert summary["covariance_source"] == "table" and summary["noise_share"] > 0
    model = load_default_ml_world_model(out)
    assert isinstance(model, ProgramProfileWorldModel)
    wine = get_task("wine")
    p = model.predict([wine.description], [load_table().for_task("wine")[0].program()])
    assert p.valid.all() and p.std[0] > 0
