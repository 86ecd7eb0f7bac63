"""Package discovery only; all metadata lives in pyproject.toml.

The real environments live in the top-level folder ``envs/`` and install as ``wmrl_env.envs``.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["wmrl_env", "wmrl_env.*"])
    + ["wmrl_env.envs"]
    + [f"wmrl_env.envs.{name}" for name in find_packages("envs")],
    package_dir={"wmrl_env.envs": "envs"},
)
