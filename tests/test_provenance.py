"""Provenance: what each committed ``summary.json`` records about the code and settings
that made it, and that those settings are still the scripts' settings."""

import json
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from bojax.errors import SettingsError
from bojax.reports import (
    arc_kernel,
    architecture_search,
    bnn_surrogate,
    ensemble_design,
    hybrid_exploration,
)
from bojax.reports import provenance as provenance_module
from bojax.reports.provenance import (
    begin,
    code_fingerprint,
    fingerprint,
    git_state,
    migrate,
    overrides,
    package_sources,
    plain,
    provenance,
    result_code,
    sources_at,
    stamp,
    version1_fingerprint,
)

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


def test_the_block_names_the_code_settings_libraries_device_and_time():
    import time

    cfg, defaults = hybrid_exploration.config(True, toy_seeds=1), hybrid_exploration.config(True)
    started = replace(begin(cfg), clock=time.perf_counter() - 2.0)
    block = provenance(started, cfg, defaults)
    assert block["bojax"] and block["jax"] and block["blackjax"]
    assert block["device"].startswith(("cpu", "gpu", "cuda", "rocm", "tpu"))
    assert block["device_count"] >= 1
    assert 2.0 <= block["wall_seconds"] < 60.0
    assert block["overrides"] == {"toy_seeds": 1}
    assert block["code_fingerprint"] == code_fingerprint("hybrid_exploration")
    assert block["fingerprint"] == fingerprint(block["code_fingerprint"], cfg)
    assert block["fingerprint"] != fingerprint(block["code_fingerprint"], defaults)
    assert json.loads(json.dumps(block)) == block  # plain JSON
    summary = stamp({"config": plain(cfg)}, started, cfg, cfg)
    assert summary["provenance"]["overrides"] == {}


def test_the_block_names_the_code_the_run_began_with_not_an_edit_or_commit_made_since(
    monkeypatch,
):
    """A report runs for up to hours: an edit or a commit meanwhile is not its code."""
    cfg = hybrid_exploration.config(True)
    started = begin(cfg)
    assert (started.commit, started.dirty) == git_state()
    sources = package_sources()
    path = "bojax/gp/kernels.py"
    edited = sources | {path: sources[path] + "\nEDITED = 1\n"}
    monkeypatch.setattr(provenance_module, "git_state", lambda folder=None: ("f" * 40, True))
    monkeypatch.setattr(provenance_module, "package_sources", lambda root=None: edited)
    provenance_module._current_fingerprint.cache_clear()
    try:
        assert code_fingerprint("hybrid_exploration") != started.code  # the edit shows now
        block = provenance(started, cfg, cfg)
    finally:
        provenance_module._current_fingerprint.cache_clear()
    assert (
        block["code_fingerprint"] == started.code == code_fingerprint("hybrid_exploration", sources)
    )
    assert (block["git_commit"], block["git_dirty"]) == (started.commit, started.dirty)
    assert block["fingerprint"] == fingerprint(started.code, cfg)
    with pytest.raises(SettingsError, match="began as one of 'hybrid_exploration'"):
        provenance(started, arc_kernel.config(True), arc_kernel.config(True))


def test_result_code_leaves_out_comments_docstrings_figures_and_claims():
    source = '''"""Module."""
import numpy as np  # why


def score(x):
    """Doc."""
    return np.sum(x)  # a comment


def plot_score(ax, x):
    ax.plot(x, color="red")


def claims(summary):
    return []
'''
    code = result_code(source)
    assert code == "import numpy as np\ndef score(x):\n    return np.sum(x)"
    assert result_code(source.replace('"red"', '"blue"').replace("Doc.", "Other.")) == code
    assert result_code(source.replace("np.sum", "np.mean")) != code


def _edited(sources: dict, path: str, old: str, new: str) -> dict:
    assert old in sources[path], (path, old)
    return sources | {path: sources[path].replace(old, new, 1)}


def test_the_fingerprint_covers_the_engine_and_the_reports_own_code_only():
    """A figure's colour, a docstring or another report's module leave a report's
    fingerprint alone; the engine and the report's own result code do not."""
    sources = package_sources()
    reports = ("arc_kernel", "hybrid_exploration", "bnn_surrogate")
    before = {r: code_fingerprint(r, sources) for r in reports}
    assert before == {r: code_fingerprint(r) for r in reports}  # the checkout's own
    unchanged = [
        _edited(sources, "bojax/reports/arc_kernel/figures.py", "tab:red", "tab:pink"),
        _edited(sources, "bojax/reports/hybrid_exploration.py", '"C3-", lw=1.2', '"C1-", lw=1'),
        _edited(sources, "bojax/gp/kernels.py", '"""', '"""Reworded. '),
    ]
    for edited in unchanged:
        assert {r: code_fingerprint(r, edited) for r in reports} == before
    engine = _edited(sources, "bojax/gp/kernels.py", "\nimport ", "\nSIGN = -1\nimport ")
    assert all(code_fingerprint(r, engine) != before[r] for r in reports)
    arc = _edited(sources, "bojax/reports/arc_kernel/runs.py", '"ei"', '"log_ei"')
    assert code_fingerprint("arc_kernel", arc) != before["arc_kernel"]
    assert code_fingerprint("hybrid_exploration", arc) == before["hybrid_exploration"]
    shared = _edited(sources, "bojax/reports/peers.py", "uniform(size=", "normal(size=")
    assert code_fingerprint("arc_kernel", shared) != before["arc_kernel"]  # it runs peers


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


def test_committed_fingerprints_are_those_of_the_code_that_made_them():
    """Each committed summary records its commit; the sources there give its fingerprints
    (and hash to its first-version fingerprint, where a migrated summary has one), so they
    are the code that ran."""
    for name in COMMITTED:
        summary = json.loads((FIGURES / name / "summary.json").read_text())
        block = summary["provenance"]
        try:
            sources = sources_at(block["git_commit"])
        except (OSError, subprocess.SubprocessError):
            pytest.skip("the summaries' commits are not in this checkout")
        if "code_fingerprint_v1" in block:  # (a summary migrated from the first version)
            assert version1_fingerprint(sources) == block["code_fingerprint_v1"], name
        report = name.split("/")[0]
        assert code_fingerprint(report, sources) == block["code_fingerprint"], name
        assert fingerprint(block["code_fingerprint"], summary["config"]) == block["fingerprint"]


def test_migration_refuses_a_commit_that_is_not_the_code_that_ran():
    summary = json.loads((FIGURES / "hybrid_exploration/full/summary.json").read_text())
    block = summary["provenance"]
    for key in ("fingerprint", "code_fingerprint"):
        del block[key]
    block["code_fingerprint"] = "0" * 12  # not what the commit's sources hash to
    old = json.loads(json.dumps(summary))
    try:
        assert not migrate(summary, "hybrid_exploration")
    except (OSError, subprocess.SubprocessError):
        pytest.skip("the summary's commit is not in this checkout")
    assert summary == old
    block["code_fingerprint"] = block.pop("code_fingerprint_v1")
    assert migrate(summary, "hybrid_exploration")
    assert block["fingerprint"] == fingerprint(block["code_fingerprint"], summary["config"])


def test_the_figures_readme_names_each_summarys_commit():
    readme = (FIGURES / "README.md").read_text()
    for name in COMMITTED:
        block = json.loads((FIGURES / name / "summary.json").read_text()).get("provenance")
        if block is not None:
            assert block["git_commit"][:10] in readme, f"{name}: commit not in README"
