"""The DockerSandbox image recipe: ``build.sh`` (offline: mmdebstrap + ``docker import``),
``packages.txt`` and a ``Dockerfile`` for machines that can pull a base image.

Build it with ``wmrl build-image``; see :mod:`wmrl_env.sandboxes.image`.
"""

__all__: list[str] = []  # a data package: the recipe files
