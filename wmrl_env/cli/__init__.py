"""The ``wmrl`` command line: thin front ends over the library's own functions.

The entry point is :func:`wmrl_env.cli.main.main` (``wmrl --help``); each command is a module
here. Nothing is exported: the functions the commands call live in the library.
"""

__all__: list[str] = []
