"""The DockerSandbox image recipe: ``build.sh`` (offline: mmdebstrap + ``docker import``),
``packages.txt`` and a ``Dockerfile`` for machines that can pull a base image.

Build it with ``wmrl build-image``; see :mod:`wmrl_env.sandboxes.image`.
"""
