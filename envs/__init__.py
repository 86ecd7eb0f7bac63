"""The real environments of wmrl-env, installed as ``wmrl_env.envs``.

Each sub-package is one family (ML tasks, robosuite, LIBERO) and imports its heavy
dependencies only inside the environment that needs them.
"""

__all__: list[str] = []  # each family is imported by its sub-package
