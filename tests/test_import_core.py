"""``import wmrl_env`` and every core module work with the core install alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from wmrl_env.utils.imports import EXTRA_OF_MODULE

CORE_MODULES = [
    "wmrl_env",
    "wmrl_env.executors",
    "wmrl_env.sandboxes",
    "wmrl_env.env_executors",
    "wmrl_env.sandboxes.cache",
    "wmrl_env.sandboxes.docker_sandbox",
    "wmrl_env.sandboxes.image",
    "wmrl_env.sandboxes.local",
    "wmrl_env.sandboxes.ray_executor",
    "wmrl_env.cli.build_image",
    "wmrl_env.world_models",
    "wmrl_env.cli.main",
    "wmrl_env.fusion",
    "wmrl_env.demo",
    "wmrl_env.sandboxes.replay",
    "wmrl_env.store",
    "wmrl_env.envs.ml_tasks",
    "wmrl_env.world_models.text",
    "wmrl_env.world_models.lm.score_bins",
    "wmrl_env.world_models.lm.prompting",
    "wmrl_env.world_models.embeddings.heads",
    "wmrl_env.world_models.training_data",
    "wmrl_env.world_models.embeddings.encoder",
    "wmrl_env.world_models.embeddings.embedding_regressor",
    "wmrl_env.world_models.lm.causal_lm",
    "wmrl_env.world_models.lm.lora",
    "wmrl_env.world_models.lm.vllm_backend",
    "wmrl_env.world_models.lm.tiny_lm",
    "wmrl_env.cli.train_world_model",
    "wmrl_env.wrappers",
    "wmrl_env.env_executors.gym_env",
    "wmrl_env.utils.args",
    "wmrl_env.envs.remote",
    "wmrl_env.envs.robosuite",
    "wmrl_env.envs.libero",
    "wmrl_env.world_models.dynamics.ensemble",
]


def test_core_imports_without_any_extra() -> None:
    """Block every optional dependency, then import the core: nothing may reach for them."""
    script = textwrap.dedent(
        f"""
        import importlib, sys
        BLOCKED = {sorted(EXTRA_OF_MODULE)!r}

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"blocked optional dependency: {{name}}")
                return None

        sys.meta_path.insert(0, Blocker())
        for module in {CORE_MODULES!r}:
            importlib.import_module(module)
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not leaked, leaked
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
