"""bojax inside other tools: :mod:`bojax.integrations.optuna` (an Optuna sampler)."""
