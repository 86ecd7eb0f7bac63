"""The program world models for ML code (v2, v3, v4), imported by module (the public names are in
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

World model v4 reads any program of the open space (the second suite's grammar):

- :mod:`~wmrl_env.world_models.programs.grammar_features`: a program's slots and
  hyperparameters, read from its estimator calls, as numbers;
- :mod:`~wmrl_env.world_models.programs.open_space_tasks`: the task meta-features it reads;
- :mod:`~wmrl_env.world_models.programs.residual_regression`: the per-task Bayesian linear
  posterior on the prior's residual;
- :mod:`~wmrl_env.world_models.programs.open_space`: the model and its artifact;
- :mod:`~wmrl_env.world_models.programs.open_space_data`,
  :mod:`~wmrl_env.world_models.programs.open_space_fit`,
  :mod:`~wmrl_env.world_models.programs.open_space_selection`,
  :mod:`~wmrl_env.world_models.programs.open_space_build`: its training rows from a pool
  table, fitting and measuring it, choosing its design, building the committed artifact.
"""

__all__: list[str] = []
