"""Small helpers shared across the package, imported by module (``wmrl_env.utils.imports``,
``.hashing``, ``.args``); nothing is exported at package level."""

__all__: list[str] = []
