"""A real ML job (numpy, pandas, scikit-learn on a read-only input) on every backend."""

from __future__ import annotations

import textwrap

import pytest
from sandbox_testing import SCORE

from wmrl_env.sandboxes import Job


@pytest.mark.slow
def test_ml_job_with_numpy_pandas_sklearn(sandbox_factory, tmp_path) -> None:
    rows = ["x1,x2,y"] + [f"{i % 7},{(i * 3) % 5},{int(i % 7 > 3)}" for i in range(200)]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
    program = textwrap.dedent(
        """
        import json
        import numpy as np, pandas as pd
        from sklearn.linear_model import LogisticRegression
        frame = pd.read_csv("inputs/train.csv")
        model = LogisticRegression().fit(frame[["x1", "x2"]], frame["y"])
        accuracy = float(np.mean(model.predict(frame[["x1", "x2"]]) == frame["y"]))
        json.dump({"score": accuracy}, open("score.json", "w"))
        """
    )
    job = Job(
        program,
        inputs={"train.csv": tmp_path / "train.csv"},
        output_files=SCORE.files,
        scorer=SCORE,
    )
    sandbox = sandbox_factory(timeout_s=120, memory_mb=1024)
    [result] = sandbox.run([job])
    assert result.ok, result.stderr
    assert result.score > 0.9
