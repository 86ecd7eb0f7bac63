"""Fixtures shared by the world-model tests: a tiny causal LM built offline."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory) -> str:
    pytest.importorskip("transformers", reason="needs the transformers extra")
    from wmrl_env.world_models.lm.tiny_lm import build_tiny_causal_lm

    return str(build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm"), seed=0))
