"""The persistent compilation cache: where it goes, how it is turned off, and that a second
run reads its programs instead of compiling them."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import pytest
from conftest import FAST_COMPILES, LOOP_EMITTERS, jaxlib_version, suite_xla_flags

from bojax import compilation


@pytest.fixture
def jax_cache_setting():
    """Put JAX's cache settings back after a test changes them."""
    saved = (
        jax.config.jax_compilation_cache_dir,
        jax.config.jax_persistent_cache_min_compile_time_secs,
    )
    yield
    jax.config.update("jax_compilation_cache_dir", saved[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])


@pytest.mark.parametrize("setting", ["off", "0", "false", "no", ""])
def test_the_variable_turns_the_cache_off(monkeypatch, jax_cache_setting, setting):
    monkeypatch.setenv(compilation.CACHE_VARIABLE, setting)
    jax.config.update("jax_compilation_cache_dir", None)
    assert compilation.use_persistent_cache() is None
    assert jax.config.jax_compilation_cache_dir is None


def test_the_variable_moves_the_cache_and_a_users_own_folder_is_kept(
    tmp_path, monkeypatch, jax_cache_setting
):
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv(compilation.CACHE_VARIABLE, str(tmp_path / "mine"))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")  # XLA quiet: cache allowed on CPU
    assert compilation.use_persistent_cache() == tmp_path / "mine"
    assert (tmp_path / "mine").is_dir()
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "theirs"))
    assert compilation.use_persistent_cache() == tmp_path / "theirs"  # not replaced


def test_the_default_folder_is_per_user(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compilation.default_cache_folder() == tmp_path / "bojax" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert compilation.default_cache_folder().parts[-3:] == (".cache", "bojax", "jax")


def test_the_suite_caches_its_programs_in_its_own_folder_not_the_users(request):
    """tests/conftest.py points the cache at pytest's cache folder, which every worker
    and subprocess inherits; BOJAX_COMPILATION_CACHE set by whoever runs the suite wins."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        pytest.skip("the caller gave JAX its own folder, which bojax keeps")
    folder = jax.config.jax_compilation_cache_dir
    assert folder is None or Path(folder).resolve() != compilation.default_cache_folder().resolve()
    ours = request.config.cache.mkdir("bojax-jax")
    if os.environ[compilation.CACHE_VARIABLE] == str(ours) and folder is not None:
        assert Path(folder) == ours


RUN = textwrap.dedent(
    """
    import bojax  # first, as the CLI does: it sets XLA's log level before jaxlib loads
    import json, jax
    jax.config.update("jax_enable_x64", True)
    from bojax.objectives.problems import get_problem

    hits = []
    HIT = "/jax/compilation_cache/cache_hits"
    jax.monitoring.register_event_listener(lambda event, **kw: hits.append(event == HIT))
    problem = get_problem("forrester")
    result = bojax.minimize(problem, problem.space, iterations=2, initial=3, samples=8,
                            burn_in=8, num_candidates=64, progress=False)
    print(json.dumps({"hits": sum(hits), "y": [r["y"] for r in result.history]}))
    """
)


@pytest.mark.slow
def test_a_second_run_reads_its_programs_from_the_cache(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env[compilation.CACHE_VARIABLE] = str(tmp_path / "cache")
    logs = []

    def run():
        done = subprocess.run(
            [sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        logs.append(done.stderr)
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    # JAX 0.9 logs 3 KB per program read back on some CPUs; bojax quietens that log.
    assert "cpu_aot_loader" not in logs[1]
    assert any((tmp_path / "cache").iterdir())
    # (A run may hit its own entries: two jitted wrappers can lower to one program.)
    assert second["hits"] > first["hits"] + 20  # the fit, scores, refinement, eager ops
    assert second["y"] == first["y"]  # a cached program computes exactly what it did


@pytest.mark.parametrize(
    ("cache", "level", "expected"),
    [(None, None, "3"), ("off", None, "unset"), (None, "1", "1")],
)
def test_import_quietens_xla_logs_only_when_the_cache_is_on_and_the_user_chose_nothing(
    cache, level, expected
):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CPP_MIN_LOG_LEVEL", compilation.CACHE_VARIABLE)
    }
    env.update(
        {
            k: v
            for k, v in [(compilation.CACHE_VARIABLE, cache), ("TF_CPP_MIN_LOG_LEVEL", level)]
            if v
        }
    )
    check = "import os, bojax; print(os.environ.get('TF_CPP_MIN_LOG_LEVEL', 'unset'))"
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == expected, done.stderr[-2000:]


@pytest.mark.slow
def test_listing_commands_do_not_load_jax():
    """`bojax --help` and `bojax problems` answer without importing JAX (under a second)."""
    check = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from bojax.cli import app\n"
        "for args in (['--help'], ['problems']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        "assert 'jax' not in sys.modules, 'jax was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize(
    ("script", "level", "cached"),
    [
        ("import bojax, jax", None, True),  # bojax quietens XLA before it loads
        ("import jax, bojax", None, False),  # too late: JAX's own default (1) logs errors
        ("import jax, bojax", "3", True),  # the user quietened it
    ],
)
def test_the_cache_is_on_for_cpu_only_where_xla_cannot_flood_stderr_with_its_reloads(
    tmp_path, script, level, cached
):
    """With JAX imported first, XLA logged 3 KB per program read back from the cache:
    118 KB for a small second run."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env[compilation.CACHE_VARIABLE] = str(tmp_path / "cache")
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    check = f"{script}\nfrom bojax.compilation import use_persistent_cache\n"
    check += "print(use_persistent_cache() is not None)"
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == str(cached), done.stderr[-2000:]


needs_proc = pytest.mark.skipif(
    not os.path.exists("/proc/self/maps"), reason="memory maps are read from /proc"
)


@needs_proc
def test_programs_are_dropped_only_past_the_share_of_the_map_limit():
    square = jax.jit(lambda x: x * x)
    square(2.0)
    before = compilation.releases
    assert not compilation.release_if_crowded(share=1.0)  # a test process is far below
    with compilation.count_compilations() as kept:
        square(3.0)
    assert kept.total == 0 and compilation.releases == before
    assert compilation.release_if_crowded(share=0.0)
    with compilation.count_compilations() as dropped:
        square(3.0)
    assert dropped.total == 1 and compilation.releases == before + 1


@needs_proc
def test_the_maps_are_read_again_only_after_a_compilation(monkeypatch):
    import time

    reads = []
    read = compilation._count_lines
    monkeypatch.setattr(compilation, "_count_lines", lambda path: reads.append(1) or read(path))
    unique = float(time.time_ns() % 1000003)  # a program no cache holds: it compiles
    jax.jit(lambda x: x + unique)(1.0)
    assert not compilation.release_if_crowded(share=1.0)
    assert not compilation.release_if_crowded(share=1.0)  # nothing compiled since: no look
    assert len(reads) == 1
    jax.jit(lambda x: x * unique)(1.0)
    assert not compilation.release_if_crowded(share=1.0)
    assert compilation.release_if_crowded(share=0.0)  # a look past the share always reads
    assert len(reads) == 3


@pytest.mark.slow  # 21 s: a whole run under a tight program budget
@needs_proc
def test_a_crowded_run_drops_its_programs_and_proposes_the_same_points(monkeypatch):
    import numpy as np

    import bojax
    from bojax.objectives.problems import get_problem

    forrester = get_problem("forrester")

    def run() -> np.ndarray:
        state = bojax.init(forrester.space, surrogate="gp-map", initial=3, seed=4)
        for _ in range(5):
            u, state, _ = bojax.ask(state)
            state = bojax.tell(state, u, forrester(forrester.space.from_unit(u)))
        return state.u

    reference = run()
    before = compilation.releases
    monkeypatch.setattr(compilation, "MAP_SHARE", 0.0)  # every model-based ask releases
    np.testing.assert_array_equal(run(), reference)
    assert compilation.releases == before + 2  # the asks after the 3-point design


def test_no_warnings_fails_on_a_warning_but_a_cache_entry_read_as_it_was_written(no_warnings):
    import warnings

    with no_warnings():  # JAX's words, jax/_src/compiler.py: it then compiles the program
        warnings.warn("Error reading persistent compilation cache entry: ...", stacklevel=1)
        warnings.warn("Error writing persistent compilation cache entry: ...", stacklevel=1)
    with pytest.raises(UserWarning, match="anything else"), no_warnings():
        warnings.warn("anything else", stacklevel=1)


TILED, LEVEL_2 = "--xla_cpu_use_fusion_emitters=true", "--xla_backend_optimization_level=2"


@pytest.mark.parametrize(
    ("flags", "jaxlib", "expected"),
    [
        ("", (0, 9, 2), f"{FAST_COMPILES} {LOOP_EMITTERS}"),
        ("--xla_dump_to=/d", (0, 9, 1), f"--xla_dump_to=/d {FAST_COMPILES} {LOOP_EMITTERS}"),
        (TILED, (0, 9, 2), f"{TILED} {FAST_COMPILES}"),
        (LEVEL_2, (0, 9, 2), f"{LEVEL_2} {LOOP_EMITTERS}"),
        ("", (0, 9, 0), FAST_COMPILES),  # before the tiled emitter (openxla/xla#41173)
        ("", (0, 12, 0), FAST_COMPILES),  # no such flag: XLA would abort the process
        ("", None, FAST_COMPILES),
    ],
)
def test_the_suite_compiles_quickly_unless_whoever_runs_it_set_the_flags(flags, jaxlib, expected):
    assert suite_xla_flags(flags, jaxlib) == expected


def test_the_suites_xla_flags_are_ones_the_installed_jaxlib_knows():
    """XLA aborts a process whose XLA_FLAGS name a flag it does not know: a child given
    the suite's flags for the installed jaxlib computes."""
    env = dict(os.environ, XLA_FLAGS=suite_xla_flags("", jaxlib_version()))
    check = "import jax; print(float(jax.jit(lambda x: (x * x).sum())(jax.numpy.arange(4.0))))"
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout) == 14.0
