"""The Docker sandbox's parts, imported by module (the public names are in
:mod:`wmrl_env.sandboxes`: ``DockerSandbox``, ``DockerUnavailableError``,
``SandboxImageMissingError``, ``cleanup_leaked_containers``).

- :mod:`~wmrl_env.sandboxes.docker.engine`: reaching the engine, container labels, leftovers,
  OOM kills;
- :mod:`~wmrl_env.sandboxes.docker.sandbox`: :class:`DockerSandbox`, one container per job;
- :mod:`~wmrl_env.sandboxes.docker.warm`: the warm pool of ``DockerSandbox(warm=True)``, one
  long-lived container per worker that forks a fresh process per job;
- :mod:`~wmrl_env.sandboxes.docker.warm_init`: the first process of a warm container
  (standard library only: it runs inside the container).

Each imports only the ones listed before it.
"""

__all__: list[str] = []
