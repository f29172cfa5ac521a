"""BLAS threads inside the BO loop: limited to BOJAX_BLAS_THREADS (default 1), left alone
with ``off``, restored afterwards, and a bad setting is a clear error."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import bojax
from bojax import threads
from bojax.bo import freezethaw, loop


def use_setting(monkeypatch, setting: str | None) -> None:
    """BOJAX_BLAS_THREADS set to ``setting``, or unset for None."""
    if setting is None:
        monkeypatch.delenv(threads.THREADS_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(threads.THREADS_VARIABLE, setting)


def blas_thread_counts() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.mark.parametrize(
    "setting,expected", [(None, 1), ("3", 3), ("off", None), ("0", None), (" 2 ", 2)]
)
def test_the_variable_sets_the_thread_count(monkeypatch, setting, expected):
    use_setting(monkeypatch, setting)
    assert threads.configured_threads() == expected


@pytest.mark.parametrize("setting", ["-1", "many", "1.5"])
def test_a_bad_setting_names_the_variable(monkeypatch, setting):
    monkeypatch.setenv(threads.THREADS_VARIABLE, setting)
    with pytest.raises(ValueError, match=threads.THREADS_VARIABLE):
        threads.configured_threads()


class Seen(Exception):
    pass


def spy_on_fits(monkeypatch, module) -> list[list[int]]:
    """``module.fit_surrogate`` replaced by a spy that records the BLAS thread counts it
    runs under and then raises :class:`Seen`; the list of those records."""
    if not blas_thread_counts():
        pytest.skip("no BLAS library loaded that threadpoolctl can see")
    seen = []

    def spy(state):
        seen.append(blas_thread_counts())
        raise Seen

    monkeypatch.setattr(module, "fit_surrogate", spy)
    return seen


@pytest.mark.parametrize("setting", [None, "off"])
def test_ask_fits_and_proposes_with_one_blas_thread_and_restores_them(monkeypatch, setting):
    seen = spy_on_fits(monkeypatch, loop)
    use_setting(monkeypatch, setting)
    before = blas_thread_counts()
    space = bojax.Space([bojax.Real("x", 0.0, 1.0)])
    state = loop.init(space, bojax.Settings(initial=2, seed=0))
    for x in (0.2, 0.7):
        state = loop.tell(state, np.array([x]), x**2)
    with pytest.raises(Seen):
        loop.ask(state)
    assert seen == [[1] * len(before) if setting is None else before]
    assert blas_thread_counts() == before


def test_a_freeze_thaw_decision_fits_with_one_blas_thread(monkeypatch):
    # A decision, or the pruner's worth, fits its own surrogate (not through ask).
    seen = spy_on_fits(monkeypatch, freezethaw)
    use_setting(monkeypatch, None)
    before = blas_thread_counts()
    space = bojax.Space([bojax.Real("x", 0.0, 1.0)])
    model = freezethaw.FreezeThaw(space, bojax.Settings(max_step=9, initial=2, seed=0))
    designs = [
        freezethaw.Design(np.array([x]), {"x": x}, [[1, x], [3, x / 2]]) for x in (0.2, 0.5, 0.7)
    ]
    with pytest.raises(Seen):
        model.decide(designs, len(designs))
    with pytest.raises(Seen):  # BojaxPruner's way in
        model.worth(designs, [0])
    assert seen == [[1] * len(before)] * 2
    assert blas_thread_counts() == before
