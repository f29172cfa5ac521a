"""Provenance: what each committed ``summary.json`` records about the code and settings
that made it, and that those settings are still the scripts' settings."""

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from bojax.reports import (
    arc_kernel,
    architecture_search,
    bnn_surrogate,
    ensemble_design,
    hybrid_exploration,
)
from bojax.reports.provenance import git_state, overrides, plain, provenance, stamp

FIGURES = Path(__file__).resolve().parents[1] / "paper_figures"
# Each committed full-mode summary and the report's defaults for it.
COMMITTED = {
    "arc_kernel/full": lambda: arc_kernel.config(),
    "architecture_search/full": lambda: architecture_search.config(),
    "bnn_surrogate/full": lambda: bnn_surrogate.config(),
    "hybrid_exploration/full": lambda: hybrid_exploration.config(),
    "ensemble_design/experiment1": lambda: ensemble_design.config(1),
    "ensemble_design/experiment2": lambda: ensemble_design.config(2),
}


@dataclass(frozen=True)
class Toy:
    quick: bool
    seeds: int
    arms: tuple[str, ...] = ("a", "b")


def test_overrides_are_the_fields_that_differ_from_the_defaults():
    assert overrides(Toy(False, 3), Toy(False, 3)) == {}
    assert overrides(Toy(False, 10, ("a",)), Toy(False, 3)) == {"seeds": 10, "arms": ["a"]}


def test_the_block_names_the_code_libraries_device_and_time():
    import time

    started = time.perf_counter() - 2.0
    block = provenance(started, Toy(True, 1), Toy(True, 2))
    assert block["bojax"] and block["jax"] and block["blackjax"]
    assert block["device"].startswith(("cpu", "gpu", "cuda", "rocm", "tpu"))
    assert block["device_count"] >= 1
    assert 2.0 <= block["wall_seconds"] < 60.0
    assert block["overrides"] == {"seeds": 1}
    assert json.loads(json.dumps(block)) == block  # plain JSON
    summary = stamp({"config": plain(Toy(True, 1))}, started, Toy(True, 1), Toy(True, 1))
    assert summary["provenance"]["overrides"] == {}


def test_the_commit_is_this_checkouts():
    try:
        head = subprocess.run(
            ["git", "-C", str(FIGURES.parent), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    commit, dirty = git_state()
    assert commit == head and isinstance(dirty, bool)
    assert git_state(Path("/")) == (None, None)


@pytest.mark.parametrize("name", list(COMMITTED))
def test_committed_summaries_match_their_scripts_current_settings(name):
    """A committed summary's settings are the script's defaults except where it records
    an override: if a default changes, the figures it made are stale and this fails."""
    summary = json.loads((FIGURES / name / "summary.json").read_text())
    block = summary["provenance"]
    assert block["git_commit"] and block["wall_seconds"] > 0
    assert summary["config"] == plain(COMMITTED[name]()) | block["overrides"]


def test_the_figures_readme_names_each_summarys_commit():
    readme = (FIGURES / "README.md").read_text()
    for name in COMMITTED:
        block = json.loads((FIGURES / name / "summary.json").read_text()).get("provenance")
        if block is not None:
            assert block["git_commit"][:10] in readme, f"{name}: commit not in README"
