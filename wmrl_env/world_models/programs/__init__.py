"""The program world models for ML code (v2, v3), imported by module (the public names are in
:mod:`wmrl_env.world_models`: ``ProgramProfileWorldModel``, ``ProgramTaskWorldModel``,
``StatusModel``, ``load_default_ml_world_model``, ``load_ml_world_model``).

They read a program's syntax tree, never run it. In reading order:

- :mod:`~wmrl_env.world_models.programs.program_features`: numbers from a program's syntax
  tree; :mod:`~wmrl_env.world_models.programs.gp_features`: the ones the task-local GP reads;
- :mod:`~wmrl_env.world_models.programs.program_rows`: (task, program) feature rows;
- :mod:`~wmrl_env.world_models.programs.tree_ensemble`,
  :mod:`~wmrl_env.world_models.programs.tree_classifier`: fitted boosters as plain arrays;
- :mod:`~wmrl_env.world_models.programs.pretraining`: what v2 and v3 share in their
  pretrained part;
- :mod:`~wmrl_env.world_models.programs.task_residual`: the per-task Gaussian process (v2);
- :mod:`~wmrl_env.world_models.programs.program_covariance`: how programs co-vary across
  tasks (v3);
- :mod:`~wmrl_env.world_models.programs.status_model`: how a parseable program's run ends;
- :mod:`~wmrl_env.world_models.programs.program_outcomes`: the prediction contract for both;
- :mod:`~wmrl_env.world_models.programs.program_task` (v2),
  :mod:`~wmrl_env.world_models.programs.program_profile` (v3) and
  :mod:`~wmrl_env.world_models.programs.ml_default` (the committed artifacts in
  ``pretrained/``, loaded by version).
"""

__all__: list[str] = []
