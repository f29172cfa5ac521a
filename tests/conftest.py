"""Test configuration: float64 by default (as the CLI and experiments run), bounded hypothesis."""

import contextlib
import gc
import importlib.util
import os
import shutil
import warnings
from pathlib import Path

import bojax  # before JAX, as a script should: XLA's log quietened, cache on

# isort: split
import jax
import pytest
from hypothesis import settings

# Most of the suite's time is compiling programs that then run once on tiny data, so
# XLA's CPU backend compiles them quickly rather than well (docs/design.md); a run
# outside the suite compiles with XLA's defaults. A flag already in XLA_FLAGS wins. (Set
# here, after JAX's import: XLA reads XLA_FLAGS when its backend starts.)
# * Without LLVM's optimisation passes: the fast tier 27 % quicker (485 s -> 353 s on 2
#   cores). The HLO passes (fusion, simplification) still run.
FAST_COMPILES = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
# * With XLA's loop fusion emitters, not the tiled fusion emitter jaxlib 0.9.1 brought
#   in (openxla/xla#41173): the fast tier 416 s instead of 608 s with an empty cache
#   (benchmarks/cpu_emitters.py). Measured on jaxlib 0.9.2, the lock's for Python 3.11;
#   jaxlib 0.12 (the lock's for 3.12+) has no such flag, and XLA aborts a process whose
#   XLA_FLAGS name a flag it does not know, so it is added for 0.9.x only.
LOOP_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
LOOP_EMITTERS_JAXLIB = ((0, 9, 1), (0, 10, 0))  # [from, before)


def jaxlib_version() -> tuple[int, int, int] | None:
    """The installed jaxlib's (major, minor, patch), read without loading it."""
    import re
    from importlib import metadata

    try:
        found = re.match(r"(\d+)\.(\d+)\.(\d+)", metadata.version("jaxlib"))
    except metadata.PackageNotFoundError:
        return None
    return tuple(int(part) for part in found.groups()) if found else None


def suite_xla_flags(flags: str, jaxlib: tuple[int, int, int] | None) -> str:
    """``flags`` (the user's XLA_FLAGS) with the suite's quick-compile flags added, each
    unless the user set that flag."""
    added = [FAST_COMPILES] if "xla_backend_optimization_level" not in flags else []
    start, end = LOOP_EMITTERS_JAXLIB
    if "xla_cpu_use_fusion_emitters" not in flags and jaxlib and start <= jaxlib < end:
        added.append(LOOP_EMITTERS)
    return " ".join([flags, *added]).strip()


os.environ["XLA_FLAGS"] = suite_xla_flags(os.environ.get("XLA_FLAGS", ""), jaxlib_version())

jax.config.update("jax_enable_x64", True)
# Tests start driver subprocesses and Dask workers beside this process: on a GPU, each
# would otherwise claim 75 % of its memory (harmless on CPU).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# The suite's own persistent compilation cache, in pytest's cache folder rather than the
# user's: most of a test's time is compiling, and a second run loads the programs (the
# fast tier 44 % quicker; docs/design.md). Set in pytest_configure below.
TEST_CACHE_NAME = "bojax-jax"  # .pytest_cache/d/bojax-jax; `pytest --cache-clear` empties it
# A whole fast tier writes some 26 MiB; programs of code edited since are never read again,
# and JAX evicts only with the filelock package, so past this the folder starts over.
TEST_CACHE_LIMIT_BYTES = 256 * 2**20


def _tidy(folder: Path, limit: int) -> None:
    """Empty ``folder`` past ``limit`` bytes; else drop its empty entries, which a process
    killed between creating and writing one leaves (JAX never rewrites an entry)."""
    with contextlib.suppress(OSError):
        entries = list(folder.iterdir()) if folder.is_dir() else []
        sizes = [entry.stat().st_size for entry in entries]
        if sum(sizes) > limit:
            shutil.rmtree(folder, ignore_errors=True)
        for entry, size in zip(entries, sizes, strict=True):
            if size == 0:
                entry.unlink(missing_ok=True)


def pytest_configure(config):
    """Point the compilation cache at pytest's cache folder, unless whoever runs the suite
    set BOJAX_COMPILATION_CACHE (``off``, or another folder). The process that starts the
    workers sets the variable before they start, so they, and the driver subprocesses
    and Dask workers of tests, inherit it."""
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if os.environ.get(bojax.compilation.CACHE_VARIABLE) is None:
        folder = cache.mkdir(TEST_CACHE_NAME) if cache is not None else None
        if folder is not None:
            _tidy(folder, TEST_CACHE_LIMIT_BYTES)
        os.environ[bojax.compilation.CACHE_VARIABLE] = str(folder or "off")
    bojax.compilation.use_persistent_cache()  # also for tests that compile outside BO


settings.register_profile("bojax", max_examples=40, deadline=None, derandomize=True)
settings.load_profile("bojax")


EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture
def no_warnings():
    """``with no_warnings():`` fails the test on any warning but JAX's about a cache entry
    another process of the suite was writing as it read it (JAX then compiles the
    program itself): the suite's workers share one compilation cache."""

    @contextlib.contextmanager
    def strict():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", message="Error (reading|writing) persistent")
            yield

    return strict


@pytest.fixture
def experiment_script():
    """Load ``experiments/<name>.py`` as a module: ``experiment_script("arc_kernel").main``."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"{name}_script", EXPERIMENTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def _memory_maps() -> int | None:
    """This process's memory mappings (Linux), or None where they cannot be read."""
    try:
        with open("/proc/self/maps") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return None


# Well below Linux's default vm.max_map_count (65530), above what one module adds.
_MAPS_BEFORE_CLEARING = 30_000


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Drop JAX's compiled executables after a module once they hold many memory maps.

    Each CPU executable holds a few memory mappings; one pytest process compiling the
    whole suite's programs passes Linux's default ``vm.max_map_count`` (65530) and XLA
    segfaults mid-compile. Clearing only past a threshold keeps the count bounded while
    programs that later modules share (a default surrogate on Forrester, say) stay
    compiled.
    """
    yield
    maps = _memory_maps()
    if maps is None or maps > _MAPS_BEFORE_CLEARING:
        jax.clear_caches()
        gc.collect()
