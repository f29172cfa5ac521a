"""The README's Python examples run as written."""

import re
from pathlib import Path

import pytest

from bojax.gp import kernels

README = Path(__file__).parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index):
    namespace: dict = {}
    try:
        for block in BLOCKS[: index + 1]:  # later blocks build on earlier ones
            exec(compile(block, f"README block {index}", "exec"), namespace)
    finally:
        kernels.KERNELS.pop("rq", None)
