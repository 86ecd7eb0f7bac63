"""Dynamics world models for robot state, imported by module.

- :mod:`~wmrl_env.world_models.dynamics.ensemble` (torch): ``EnsembleDynamicsModel``, a
  probabilistic ensemble learned from real transitions, and ``TorchDynamicsAdapter`` for a
  user's own model.
"""

__all__: list[str] = []
