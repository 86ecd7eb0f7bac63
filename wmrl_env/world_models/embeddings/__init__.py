"""The embedding world model, imported by module (the public names are in
:mod:`wmrl_env.world_models`: ``EmbeddingRegressor``, ``TextEncoder``).

- :mod:`~wmrl_env.world_models.embeddings.encoder`: a cached sentence encoder (transformers);
- :mod:`~wmrl_env.world_models.embeddings.heads`: regression heads on embeddings and their
  error model;
- :mod:`~wmrl_env.world_models.embeddings.embedding_regressor`: the world model.
"""

__all__: list[str] = []
