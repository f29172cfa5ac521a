"""Test configuration: float64 by default (as the CLI and experiments run), bounded hypothesis."""

import jax
from hypothesis import settings

jax.config.update("jax_enable_x64", True)

settings.register_profile("bojax", max_examples=40, deadline=None, derandomize=True)
settings.load_profile("bojax")
