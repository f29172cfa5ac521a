"""docs/extending.md runs as written: each extension is one function or class and one
register call, and the name then works in a run."""

import re
from pathlib import Path

import numpy as np
import pytest

from bojax.bo.acquisition import ACQUISITIONS
from bojax.bo.policies import POLICIES
from bojax.gp.kernels import KERNELS
from bojax.inference import SAMPLERS
from bojax.parameters import PARAMETER_KINDS
from bojax.surrogates import SURROGATES

DOC = Path(__file__).parent.parent / "docs" / "extending.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
ADDED = [(KERNELS, "rq"), (SURROGATES, "gp-map-rq"), (ACQUISITIONS, "pi_margin"),
         (POLICIES, "explore-while-uncertain"), (SURROGATES, "quadratic"),
         (SAMPLERS, "random-walk"), (SURROGATES, "gp-random-walk"),
         (PARAMETER_KINDS, "logit")]  # fmt: skip


@pytest.mark.slow
def test_every_extension_in_the_guide_registers_and_runs(capsys):
    assert len(BLOCKS) >= 6
    namespace: dict = {}
    try:
        for index, block in enumerate(BLOCKS):
            exec(compile(block, f"docs/extending.md block {index}", "exec"), namespace)
    finally:
        for registry, name in ADDED:
            if name in registry:
                registry.unregister(name)
    printed = capsys.readouterr().out
    # The guide's rational-quadratic evidence against a float64 NumPy reference.
    evidence = float(re.search(r"rq log evidence: (\S+)", printed).group(1))
    x, y = np.array([0.1, 0.5, 0.9]), np.array([1.0, -1.0, 0.5])
    gram = 1.0 / (1.0 + 0.5 * (x[:, None] - x[None, :]) ** 2) + 1e-3 * np.eye(3)
    _, logdet = np.linalg.slogdet(gram)
    reference = -0.5 * (y @ np.linalg.solve(gram, y) + logdet + 3 * np.log(2 * np.pi))
    np.testing.assert_allclose(evidence, reference, rtol=1e-10)
    # Two BO steps after three Sobol points on Forrester (minimum -6.02): each run found
    # a value below the best of the design, so the entry was really used to propose.
    for label in ("gp-map-rq best", "pi_margin best", "quadratic surrogate best"):
        assert float(re.search(rf"{label}: (\S+)", printed).group(1)) < 0.5, label
    # The logit-scaled momentum: the bowl's minimum (0 at 0.99) found within 6 BO steps.
    assert float(re.search(r"logit best: (\S+)", printed).group(1)) < 0.01, printed
    assert re.search(r"explored: \[1\.0, 1\.0\]|explored: \[1\.0, 0\.0\]", printed), printed
    # The sampler's GP fits really ran random-walk Metropolis: slice and MAP report an
    # acceptance of exactly 1, a random walk below it.
    acceptance = re.search(r"random-walk GP acceptance: \[(.*?)\]", printed).group(1)
    assert all(0.0 < float(a) < 1.0 for a in acceptance.split(",")), acceptance
