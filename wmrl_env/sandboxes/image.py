"""The DockerSandbox image: its content-hash tag, and the offline build behind ``wmrl build-image``.

The recipe lives in ``envs/sandbox_image/`` (installed as ``wmrl_env.envs.sandbox_image``):
``build.sh`` bootstraps a minimal Debian with Python, numpy, pandas and scikit-learn from a
Debian mirror (no image registry needed) and imports it into Docker. The tag is a hash of
the recipe files, so the image a checkout expects is known without Docker, an unchanged
recipe is never rebuilt, and a changed one gets a new tag.

Example:
    >>> tag = default_image()
    >>> tag.startswith("wmrl-sandbox:") and len(tag.split(":")[1]) == 12
    True
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from importlib import resources
from pathlib import Path

__all__ = ["RECIPE_FILES", "build_image", "default_image", "recipe_dir"]

REPOSITORY = "wmrl-sandbox"
RECIPE_FILES = ("build.sh", "packages.txt", "hide-datasets.sh")  # what the tag hashes, in order


def recipe_dir() -> Path:
    """The directory holding ``build.sh``, ``packages.txt`` and the ``Dockerfile``."""
    return Path(str(resources.files("wmrl_env.envs.sandbox_image")))


def default_image() -> str:
    """The tag of the image this version of wmrl-env builds (``wmrl-sandbox:<hash>``);
    ``build.sh --print-tag`` computes the same."""
    digest = hashlib.sha256()
    for name in RECIPE_FILES:
        digest.update((recipe_dir() / name).read_bytes())
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def build_image(*, force: bool = False, mirror: str | None = None) -> str:
    """Build the sandbox image (or find it already built) and return its tag.

    Needs root, ``mmdebstrap`` and a running Docker engine; progress goes to stderr. Takes
    a few minutes the first time (most of it unpacking Debian packages), none after.

    Raises:
        RuntimeError: the build failed; the message holds the end of its output.
    """
    env = dict(os.environ)
    if mirror:
        env["WMRL_DEBIAN_MIRROR"] = mirror
    command = ["bash", str(recipe_dir() / "build.sh"), *(["--force"] if force else [])]
    completed = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env, check=False)
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise RuntimeError(
            f"building the sandbox image failed (exit status {completed.returncode}); "
            f"see the output above. Command: {' '.join(command)}"
        )
    return lines[-1]
