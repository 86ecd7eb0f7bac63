"""The sandbox image recipe: one tag, computed the same way by Python and by build.sh."""

from __future__ import annotations

import argparse
import subprocess

import pytest

from wmrl_env.cli import build_image as command
from wmrl_env.sandboxes.docker.engine import connect
from wmrl_env.sandboxes.image import build_image, default_image, recipe_dir


def test_python_and_build_script_agree_on_the_tag() -> None:
    script = recipe_dir() / "build.sh"
    printed = subprocess.run(
        ["bash", str(script), "--print-tag"], capture_output=True, text=True, check=True
    )
    assert printed.stdout.strip() == default_image()


def test_recipe_ships_with_the_package() -> None:
    names = {path.name for path in recipe_dir().iterdir()}
    assert {"build.sh", "packages.txt", "Dockerfile"} <= names
    packages = (recipe_dir() / "packages.txt").read_text().split()
    assert {"python3", "python3-numpy", "python3-pandas", "python3-sklearn"} <= set(packages)


def test_cli_prints_the_tag(capsys) -> None:
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    args = parser.parse_args(["build-image", "--print-tag"])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip() == default_image()


@pytest.mark.docker
def test_second_build_reuses_the_image() -> None:
    client = connect()
    before = client.images.get(default_image()).id
    assert build_image() == default_image()
    assert client.images.get(default_image()).id == before  # found, not rebuilt
    client.close()
