"""Runs with several metrics: objectives and outcome constraints through ``minimize``,
``ask``/``tell``, the journal (resume bit-identical), the result's Pareto set and
hypervolume, and the typed errors of bad declarations and returns."""

import json
import math
import warnings

import jax
import numpy as np
import pytest

import bojax
from bojax import Real, Space
from bojax.bo import pareto
from bojax.compilation import count_compilations
from bojax.errors import JournalError, SettingsError

jax.config.update("jax_enable_x64", True)

SPACE = Space([Real("x", 0.0, 1.0), Real("w", 0.0, 1.0)])
QUIET = dict(progress=False, num_candidates=256)


def two_bowls(point):
    """Two quadratic objectives with a segment of optima between their centres, a 'size'
    that grows with x, and one metric nobody declared (it is journalled all the same)."""
    x, w = point["x"], point["w"]
    return {
        "left": (x - 0.2) ** 2 + (w - 0.5) ** 2,
        "right": (x - 0.8) ** 2 + (w - 0.5) ** 2,
        "size": 10.0 * x,
        "note": 1.0,
    }


@pytest.mark.parametrize("objectives", [2, 3, 4])
def test_the_hypervolume_history_equals_the_hypervolume_recomputed_at_every_step(objectives):
    from bojax.bo.metrics import Metrics, objective_texts

    metrics = Metrics.parse(objective_texts({f"f{k}": "min" for k in range(objectives)}), None)
    rng = np.random.default_rng(objectives)
    values = np.abs(rng.normal(size=(60, objectives)))
    values /= np.linalg.norm(values, axis=1, keepdims=True)  # a front, ...
    values *= 1.0 + 0.4 * rng.random((60, 1))  # ... dominated points, ...
    values[[7, 30]] = values[[3, 12]]  # ... and repeats
    named = [{f"f{k}": float(v[k]) for k in range(objectives)} for v in values]
    history = [{"status": "ok", "iteration": i, "x": {}, "y": y} for i, y in enumerate(named)]
    history[5]["status"] = "failed"
    summary = pareto.summary(metrics, history)
    reference = np.array(summary["reference_point"])
    usable = np.array([r["status"] == "ok" for r in history])
    expected = [pareto.hypervolume(values[: i + 1][usable[: i + 1]], reference) for i in range(60)]
    assert summary["hypervolume"] == pytest.approx(expected, rel=1e-10, abs=1e-12)


@pytest.mark.slow  # 12 s: a constrained two-objective run
def test_result_holds_the_feasible_pareto_set_and_the_hypervolume_history(tmp_path):
    result = bojax.minimize(
        two_bowls, SPACE, objectives={"left": "min", "right": "min"},
        constraints={"size": ("<=", 6.0)}, iterations=6, initial=5, seed=1, out=tmp_path,
        surrogate="gp-map", **QUIET,
    )  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert all(r["y"]["note"] == 1.0 for r in records)  # every metric journalled
    values = np.array([[r["y"]["left"], r["y"]["right"]] for r in records])
    feasible = np.array([r["y"]["size"] <= 6.0 for r in records])
    expected = {i for i in np.flatnonzero(feasible)[pareto.pareto_mask(values[feasible])]}
    assert {p["iteration"] for p in result.pareto} == expected
    assert all(p["metrics"]["size"] <= 6.0 for p in result.pareto)
    reference = np.asarray(result.reference_point)
    assert result.hypervolume[-1] == pytest.approx(pareto.hypervolume(values[feasible], reference))
    assert np.all(np.diff(result.hypervolume) >= 0) and result.hypervolume[-1] > 0
    best = min((r for r in records if r["y"]["size"] <= 6.0), key=lambda r: r["y"]["left"])
    assert result.best_value == best["y"]["left"] and result.best_point == best["x"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["pareto"] == result.pareto and summary["hypervolume"] == result.hypervolume
    # The BO steps spread along the constrained part of the segment of optima.
    proposals = [r["x"]["x"] for r in records if r["phase"] == "bo"]
    assert max(proposals) <= 0.7 and max(proposals) - min(proposals) > 0.15


@pytest.mark.slow
def test_a_maximised_objective_and_a_given_reference_point():
    def objective(point):
        return {"accuracy": 1 - (point["x"] - 0.3) ** 2, "params": 5 * point["x"] + point["w"]}

    result = bojax.minimize(
        objective, SPACE, objectives={"accuracy": "max", "params": "min"},
        reference_point={"params": 7.0, "accuracy": 0.0}, iterations=3, initial=5, seed=2,
        surrogate="gp-map", **QUIET,
    )  # fmt: skip
    assert result.reference_point == [0.0, 7.0]
    values = np.array([[r["y"]["accuracy"], r["y"]["params"]] for r in result.history])
    oriented = values * [-1, 1]
    assert result.hypervolume[-1] == pytest.approx(pareto.hypervolume(oriented, [0.0, 7.0]))
    assert result.best_value == values[:, 0].max()  # the first objective, maximised


def test_without_a_reference_point_ehvi_searches_against_the_wide_rule():
    """The acquisition's box holds every feasible evaluation (the worst standardised value
    plus a tenth); the user's point, in the objectives' units, is warped as the data are."""
    from bojax.bo.multiobjective import _reference

    settings = bojax.Settings(objectives=["a:min", "b:max"])
    metrics = settings.metrics
    z = np.array([[-1.0, 2.0], [0.5, -0.3], [1.5, 1.0]])
    shift, scale = np.array([1.0, -2.0]), np.array([2.0, 4.0])
    np.testing.assert_allclose(_reference(settings, metrics, z, shift, scale), [1.65, 2.2])
    given = settings.replace(reference_point=[5.0, 6.0])  # b is maximised: oriented -6
    np.testing.assert_allclose(_reference(given, metrics, z, shift, scale), [2.0, -1.0])


@pytest.mark.slow
def test_resume_is_bit_identical_and_steady_steps_do_not_recompile(tmp_path):
    run = dict(
        objectives={"left": "min", "right": "min"}, constraints=["size<=8"], initial=4,
        seed=3, surrogate="gp-map", **QUIET,
    )  # fmt: skip
    with count_compilations(fresh=True) as counts:
        full = bojax.minimize(two_bowls, SPACE, iterations=5, **run)
    assert counts.of("_fit") == 1, counts  # MAP's wider first restart is a traced flag
    assert counts.of("score") <= 2, counts  # the candidate grid, and the box bucket growing
    bojax.minimize(two_bowls, SPACE, iterations=2, out=tmp_path, **run)
    resumed = bojax.minimize(two_bowls, SPACE, iterations=5, out=tmp_path, resume=True, **run)
    assert [r["u"] for r in resumed.history] == [r["u"] for r in full.history]
    assert resumed.hypervolume == full.hypervolume
    with pytest.raises(JournalError, match="objectives"):  # another declaration: refused
        bojax.minimize(two_bowls, SPACE, iterations=6, out=tmp_path, resume=True,
                       **{**run, "objectives": {"left": "min", "size": "min"}})  # fmt: skip
    with pytest.raises(JournalError, match="acquisition: stored 'log_nehvi', now 'log_ehvi'"):
        bojax.minimize(two_bowls, SPACE, iterations=6, out=tmp_path, resume=True,
                       **{**run, "acquisition": "log_ehvi"})  # fmt: skip


@pytest.mark.slow  # sampled chains
def test_a_resumed_parego_batch_run_continues_the_chains_it_would_have(tmp_path):
    """ParEGO refits its scalarisation's chain for each later proposal of a batch; the
    next ask continues the batch's first fit, which a resume replays, so a resumed run
    with sampled hyperparameters is the uninterrupted one bit for bit."""
    run = dict(objectives={"left": "min", "right": "min"}, acquisition="parego", q=2,
               initial=4, seed=3, surrogate="gp-slice", **QUIET)  # fmt: skip
    full = bojax.minimize(two_bowls, SPACE, iterations=4, **run)
    bojax.minimize(two_bowls, SPACE, iterations=2, out=tmp_path, **run)
    resumed = bojax.minimize(two_bowls, SPACE, iterations=4, out=tmp_path, resume=True, **run)
    assert [r["u"] for r in resumed.history] == [r["u"] for r in full.history]


@pytest.mark.slow  # six ParEGO runs
@pytest.mark.parametrize("pooled", [False, True], ids=["inline", "pool"])
@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_killed_parego_run_keeps_what_was_in_flight_and_resumes_it(tmp_path, pooled):
    """Ctrl-C raised in an evaluation (inline, or in a pool's worker thread) leaves it in
    ``pending.json`` with its start given back; the resume evaluates it again. Inline the
    resumed run is the uninterrupted one bit for bit; a pool's proposals depend on the
    order its evaluations end (under load the uninterrupted runs differ too)."""
    import concurrent.futures as cf

    run = dict(objectives={"left": "min", "right": "min"}, acquisition="parego", initial=3,
               seed=1, surrogate="gp-map", iterations=6, **QUIET)  # fmt: skip

    def minimize(objective, **kwargs):
        if not pooled:
            return bojax.minimize(objective, SPACE, **run, **kwargs)
        with cf.ThreadPoolExecutor(2) as pool:
            return bojax.minimize(objective, SPACE, executor=pool, q=2, **run, **kwargs)

    whole, calls = minimize(two_bowls), []

    def interrupted(point):
        calls.append(point)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return two_bowls(point)

    with pytest.raises(KeyboardInterrupt):
        minimize(interrupted, out=tmp_path)
    pending = {p["proposal"]: p for p in json.loads((tmp_path / "pending.json").read_text())}
    assert 5 in pending and {p["attempts"] for p in pending.values()} == {0}
    assert pending[5]["x"] == calls[5]  # the interrupted evaluation (on a pool, maybe 6 too)
    resumed = minimize(two_bowls, out=tmp_path, resume=True)
    assert len(resumed.history) == len(whole.history)
    again = {r["proposal"]: r for r in resumed.history}
    assert all(again[k]["u"] == p["u"] and again[k]["status"] == "ok" for k, p in pending.items())
    if not pooled:
        assert [(r["u"], r["y"]) for r in resumed.history] == [
            (r["u"], r["y"]) for r in whole.history
        ]


@pytest.mark.slow  # (the fast tier's heaviest: 35 s of fits; CI runs it)
def test_ask_tell_and_batches_with_pending_points():
    settings = bojax.Settings(objectives=["left:min", "right:min"], initial=3, seed=0,
                              surrogate="gp-map", num_candidates=256)  # fmt: skip
    state = bojax.init(SPACE, settings)
    for _ in range(4):
        u, state, info = bojax.ask(state)
        state = bojax.tell(state, u, two_bowls(SPACE.from_unit(u)))
    assert state.metrics.shape == (4, 2) and info["phase"] == "bo"
    points, state, infos = bojax.bo.loop.ask_batch(state, 3, pending=state.u[:1] * 0 + 0.5)
    assert len(points) == 3 and len({tuple(p) for p in np.round(points, 9)}) == 3
    assert all(np.isfinite(i["acquisition_value"]) for i in infos)
    failed = bojax.tell(state, points[0], math.nan)  # a failure: every column missing
    assert np.all(np.isnan(failed.metrics[-1])) and np.isnan(failed.y[-1])
    with pytest.raises(bojax.errors.DataError, match="lack"):
        bojax.tell(state, points[0], {"left": 1.0})
    with pytest.raises(bojax.errors.DataError, match="must be numbers"):
        bojax.tell(state, points[0], {"left": 1.0, "right": "big"})
    for bad in ([1.0], [1.0, 2.0, 3.0], "abc", None, 2.5, [1.0, [2.0, 3.0]], ["1", "2"]):
        with pytest.raises(bojax.errors.DataError, match="tell a dict of them"):
            bojax.tell(state, points[0], bad)  # (never a one-objective run's wording)
    columns = bojax.tell(state, points[0], np.array([0.5, 0.25]))  # the columns in order
    assert columns.metrics[-1].tolist() == [0.5, 0.25]
    from decimal import Decimal  # numbers of any kind, as before; None is a failure

    assert bojax.tell(state, points[0], [Decimal("0.5"), 1]).metrics[-1].tolist() == [0.5, 1.0]
    assert np.isnan(bojax.tell(state, points[0], [1.0, None]).metrics[-1]).all()
    with pytest.raises(bojax.errors.DataError):
        bojax.tell(state, points[0], [True, 1.0])
    for text in ("1.5", True, "nan"):  # a dict's values are checked as the list's are
        with pytest.raises(bojax.errors.DataError, match="'left' is"):
            bojax.tell(state, points[0], {"left": text, "right": 1.0})
    for huge in ({"left": 10**400, "right": 1.0}, [1.0, -(10**400)]):  # beyond float64: failed
        assert np.isnan(bojax.tell(state, points[0], huge).metrics[-1]).all()


def test_a_labelled_row_is_read_by_its_labels_not_its_order():
    """A pandas row (``frame.iloc[i]``) names its metrics: told, or returned by the
    objective, in another order than the run's, its values went to the wrong metrics, and
    a misspelt label was taken (review)."""
    pd = pytest.importorskip("pandas")
    state = bojax.init(SPACE, objectives={"left": "min", "right": "min"}, surrogate="gp-map")
    u = np.array([0.2, 0.3])
    told = bojax.tell(state, u, pd.Series({"right": 0.9, "left": 0.1}))
    assert told.metrics[-1].tolist() == [0.1, 0.9]
    with pytest.raises(bojax.errors.DataError, match="lack"):
        bojax.tell(state, u, pd.Series({"left": 0.1, "rigth": 0.9}))
    with pytest.raises(bojax.errors.DataError, match="more than once"):
        bojax.tell(state, u, pd.Series([0.1, 0.9, 0.5], index=["left", "right", "left"]))
    unnamed = bojax.tell(state, u, pd.Series([0.5, 0.25]))  # no labels: the columns in order
    assert unnamed.metrics[-1].tolist() == [0.5, 0.25]
    one = bojax.init(SPACE, surrogate="gp-map")
    with pytest.raises(bojax.errors.DataError, match="one objective"):
        bojax.tell(one, u, pd.Series({"left": 0.1}))

    returns = iter([pd.Series({"right": 1.0 + i, "left": float(i)}) for i in range(3)])
    result = bojax.minimize(
        lambda point: next(returns), SPACE, objectives=["left:min", "right:min"],
        iterations=0, initial=3, seed=0, **QUIET,
    )  # fmt: skip
    assert [r["y"] for r in result.history] == [
        {"left": float(i), "right": 1.0 + i} for i in range(3)
    ]
    twice = pd.Series([1.0, 2.0, 3.0], index=["left", "right", "right"])
    with pytest.raises(bojax.errors.ObjectiveError, match=r"named more than once: \['right'\]"):
        bojax.minimize(
            lambda point: twice, SPACE, objectives=["left:min", "right:min"], iterations=0,
            initial=2, seed=0, **QUIET,
        )  # fmt: skip


def test_show_labels_a_metric_named_as_a_parameter(tmp_path):
    from typer.testing import CliRunner

    from bojax.cli import app

    def same_names(point):  # metrics named as the parameters
        return {"x": 1.0 - point["x"], "w": point["w"] + point["x"]}

    out = tmp_path / "run"
    bojax.minimize(same_names, SPACE, objectives=["x:min", "w:min"], initial=3, iterations=0,
                   out=out, **QUIET)  # fmt: skip
    shown = CliRunner().invoke(app, ["show", str(out)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    header = next(line for line in shown.output.splitlines() if "phase" in line)
    assert "x (metric)" in header and "w (metric)" in header


def test_show_and_plot_compute_the_pareto_summary_once(tmp_path, monkeypatch):
    """The summary walks the whole history; show and plot read it from several places."""
    from typer.testing import CliRunner

    from bojax.bo import pareto
    from bojax.cli import app

    out = tmp_path / "run"
    bojax.minimize(two_bowls, SPACE, objectives=["left:min", "right:min"], initial=5,
                   iterations=0, out=out, **QUIET)  # fmt: skip
    calls, summary = [], pareto.summary
    monkeypatch.setattr(pareto, "summary", lambda *a, **k: calls.append(1) or summary(*a, **k))
    for command in ("show", "plot"):
        calls.clear()
        assert CliRunner().invoke(app, [command, str(out)]).exit_code == 0
        assert len(calls) == 1, command


def test_parego_proposes_and_constraints_steer_before_anything_is_feasible():
    def objective(point):
        return {"a": point["x"], "b": 1 - point["x"] + point["w"], "c": point["w"]}

    # Feasible only where w >= 0.9: a sliver the initial design misses.
    result = bojax.minimize(
        objective, SPACE, objectives=["a:min", "b:min"], constraints=["c>=0.9"],
        acquisition="parego", iterations=4, initial=3, seed=0, surrogate="gp-map", **QUIET,
    )  # fmt: skip
    ws = [r["x"]["w"] for r in result.history]
    assert max(ws[:3]) < 0.9 and max(ws[3:]) >= 0.9  # the probability of feasibility led there
    assert all(p["metrics"]["c"] >= 0.9 for p in result.pareto) and result.pareto


def test_bad_returns_fail_the_evaluation_with_a_reason():
    calls = iter(
        [{"left": 1.0}, 3.0, {"left": 1.0, "right": "big"}, {"left": math.inf, "right": 0.0}]
        + [{"left": 1.0, "right": 2.0, "arch": "resnet", "curve": [0.5, 0.4], "aux": math.nan}]
        + [{"left": float(i), "right": -float(i)} for i in range(10)]
    )
    result = bojax.minimize(
        lambda point: next(calls), SPACE, objectives=["left:min", "right:min"], iterations=0,
        initial=5, seed=0, **QUIET,
    )  # fmt: skip
    errors = [r["error"] for r in result.history]
    assert "lacking ['right']" in errors[0]
    assert "expects a dict of metrics" in errors[1]
    assert "metric 'right'" in errors[2] and "expected a number" in errors[2]
    assert "metric 'left'" in errors[3] and "inf" in errors[3]
    assert errors[4] is None and result.failures == 4
    assert result.history[4]["y"] == {"left": 1.0, "right": 2.0}  # what is no number: left out
    # Every evaluation coming back undeclared is the run's set-up: it stops at the first.
    calls = []
    with pytest.raises(bojax.errors.ObjectiveError, match="declare objectives") as raised:
        bojax.minimize(
            lambda point: calls.append(point) or {"loss": 1.0}, SPACE, iterations=2, initial=4,
            **QUIET,
        )  # fmt: skip
    assert len(calls) == 1 and "no further evaluation started" in str(raised.value)
    calls.clear()
    with pytest.raises(bojax.errors.ObjectiveError, match="expects a dict of metrics"):
        bojax.minimize(
            lambda point: calls.append(point) or 1.0, SPACE, objectives=["a:min", "b:min"],
            iterations=2, initial=4, **QUIET,
        )  # fmt: skip
    assert len(calls) == 1
    for declared in (dict(objectives=["a:min", "b:min"]), {}):  # a tuple is neither kind
        calls.clear()
        with pytest.raises(bojax.errors.ObjectiveError, match=r"returned tuple .* expects"):
            bojax.minimize(
                lambda point: calls.append(point) or (1.0, 2.0), SPACE, iterations=2,
                initial=4, **declared, **QUIET,
            )  # fmt: skip
        assert len(calls) == 1


def test_a_misspelt_metric_stops_the_run_after_three_evaluations():
    """Metrics that lack a declared name and hold an undeclared one are a misspelt
    objective, not designs that fail: the run stops at the third rather than failing its
    whole budget; designs lacking a metric they could not measure (declared names only)
    are failed evaluations, however many come first."""
    calls = []
    with pytest.raises(bojax.errors.ObjectiveError, match=r"lacking \['acc'\]") as raised:
        bojax.minimize(
            lambda point: calls.append(point) or {"accuracy": point["x"], "size": 1.0}, SPACE,
            objectives=["acc:max", "size:min"], iterations=4, initial=6, **QUIET,
        )  # fmt: skip
    assert len(calls) == 3 and "no further evaluation started" in str(raised.value)
    outcomes = iter(
        [{"size": 1.0}, {"size": 2.0}, {"size": 3.0}, {"size": 4.0}]
        + [{"acc": 0.1 * i, "size": i} for i in range(9)]
    )
    result = bojax.minimize(
        lambda point: next(outcomes), SPACE, objectives=["acc:max", "size:min"], iterations=0,
        initial=6, **QUIET,
    )  # fmt: skip
    assert result.evaluations == 6 and result.failures == 4 and result.stopped is None


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(constraints={"size": ("<=", 1)}), "constraints need objectives"),
        (dict(objectives={"a": "minimise"}), "direction must be 'min' or 'max'"),
        (dict(objectives={"a": "min", "b": "max"}, constraints=["size<1"]), "name<=bound"),
        (dict(objectives={"a": "min"}, constraints={"s": ("<=", math.nan)}), "finite"),
        (dict(objectives=["a:min", "b:min"], reference_point=[1.0]), "2 objectives"),
        (dict(objectives=["a:min"], reference_point=[math.inf]), "reference_point"),
        (dict(objectives=["a:min"], acquisition="ei"), "log_ehvi, log_nehvi or parego"),
        (dict(acquisition="parego"), "for several metrics"),
        (dict(objectives=["a:min"], maximize=True), "name:max"),
        (dict(objectives=["a:min"], policy="hybrid"), "policies"),
        (dict(objectives=["a:min", "a:max"]), "twice"),
        (dict(objectives=["a:min", "b:min"], warping="rank"), "warping 'rank' is for one"),
        (dict(objectives=["bad name:min"]), "name must be"),
        (
            dict(objectives=["a:min", "b:min"], acquisition="log_nehvi", surrogate="bnn-hmc"),
            "log_nehvi samples fronts from a GP",
        ),
    ],
)
def test_bad_declarations_are_settings_errors(settings, message):
    with pytest.raises(SettingsError, match=message):
        bojax.Settings(**settings)


def test_the_default_acquisition_with_objectives_is_noisy_ehvi_on_a_gp():
    """Noisy EHVI needs sampled fronts, which only a GP gives; a BNN keeps exact EHVI,
    so does one objective with constraints (constrained EI), and an explicit choice
    stands."""
    several = dict(objectives=["a:min", "b:min"])
    assert bojax.Settings(**several).acquisition == "log_nehvi"
    assert bojax.Settings(**several, surrogate="gp-map").acquisition == "log_nehvi"
    assert bojax.Settings(**several, surrogate="bnn-hmc").acquisition == "log_ehvi"
    assert bojax.Settings(**several, acquisition="log_ehvi").acquisition == "log_ehvi"
    assert bojax.Settings(objectives=["a:min"], constraints=["c<=1"]).acquisition == "log_ehvi"
    assert bojax.Settings().acquisition == "log_ei"
    three, four = ([f"f{i}:min" for i in range(k)] for k in (3, 4))
    assert bojax.Settings(objectives=three).acquisition == "log_nehvi"
    assert bojax.Settings(objectives=four).acquisition == "parego"  # EHVI's boxes explode
    assert bojax.Settings(objectives=four, acquisition="log_ehvi").acquisition == "log_ehvi"


def test_a_four_objective_journal_of_the_old_default_says_how_to_resume_it(tmp_path):
    four = dict(objectives=[f"f{i}:min" for i in range(4)], initial=3, iterations=0,
                surrogate="gp-map", **QUIET)  # fmt: skip

    def metrics(point):
        return {f"f{i}": point["x"] * i + point["w"] for i in range(4)}

    bojax.minimize(metrics, SPACE, acquisition="log_nehvi", out=tmp_path, **four)
    with pytest.raises(JournalError, match="pass acquisition='log_nehvi' to resume"):
        bojax.minimize(metrics, SPACE, out=tmp_path, resume=True, **four)


def test_ehvi_refuses_a_box_decomposition_too_large_to_score():
    """Five mutually non-dominated objectives at 20 points cut into 20,288 boxes; summed
    over 16 draws they are refused before any memory is asked for (a review's ask asked
    for 34 GB). Three objectives at 20 points stay well inside."""
    from bojax.bo.multiobjective import _boxes

    rng = np.random.default_rng(0)
    for count, refused in ((5, True), (3, False)):
        front = np.abs(rng.normal(size=(20, count)))
        front /= np.linalg.norm(front, axis=1, keepdims=True)  # none dominates another
        if refused:
            with pytest.raises(SettingsError, match="acquisition='parego'"):
                _boxes(front, np.full(count, 1.1), draws=16)
        else:
            assert len(_boxes(front, np.full(count, 1.1), draws=16)[0]) <= 256


def test_a_tampered_record_is_refused_with_its_line(tmp_path):
    run = dict(objectives=["left:min", "right:min"], initial=2, seed=0, **QUIET)
    bojax.minimize(two_bowls, SPACE, iterations=0, out=tmp_path, **run)
    path = tmp_path / "journal.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    del record["y"]["right"]
    path.write_text(lines[0] + "\n" + json.dumps(record) + "\n")
    with pytest.raises(JournalError, match=r"journal.jsonl:2.*lacks the run's metric"):
        bojax.minimize(two_bowls, SPACE, iterations=1, out=tmp_path, resume=True, **run)


@pytest.mark.slow  # the CLI end to end: a run, show and plot
def test_cli_runs_shows_and_plots_a_three_objective_run(tmp_path):
    from typer.testing import CliRunner

    from bojax.cli import app

    (tmp_path / "objective.py").write_text(
        "from bojax.objectives.multiobjective import MULTI_PROBLEMS\n"
        "dtlz2 = MULTI_PROBLEMS['dtlz2']\n"
        "def f(point):\n    return {**dtlz2(point), 'size': point['x0'] * 10}\n"
    )
    space = "\n".join(f'[x{i}]\ntype = "real"\nlow = 0.0\nhigh = 1.0\n' for i in range(6))
    (tmp_path / "space.toml").write_text(space)
    out = tmp_path / "run"
    options = ["--objective", "f1:min", "--objective", "f2:min", "--objective", "f3:min",
               "--constraint", "size<=8", "--iterations", "2", "--initial", "6",
               "--surrogate", "gp-map", "--candidates", "128", "--out", str(out)]  # fmt: skip
    runner = CliRunner()
    result = runner.invoke(app, ["optimize", f"{tmp_path / 'objective.py'}:f", "--space",
                                 str(tmp_path / "space.toml"), *options])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Pareto set" in result.output and "hypervolume" in result.output
    shown = runner.invoke(app, ["show", str(out)])
    assert shown.exit_code == 0 and "Pareto set" in shown.output, shown.output
    header = json.loads((out / "run.json").read_text())["settings"]
    assert header["objectives"] == ["f1:min", "f2:min", "f3:min"]
    assert header["constraints"] == ["size<=8.0"]
    plotted = runner.invoke(app, ["plot", str(out)])
    assert plotted.exit_code == 0, plotted.output
    assert {p.name for p in (out / "figures").iterdir()} == {
        "hypervolume.png", "front.png", "parameters.png"
    }  # fmt: skip


@pytest.mark.slow  # compiles the failure classifier for a whole run
def test_failures_go_to_the_failure_model_and_the_noisy_variant_proposes():
    def fragile(point):
        if point["x"] > 0.75:
            raise RuntimeError("out of memory")
        return two_bowls(point)

    result = bojax.minimize(
        fragile, SPACE, objectives=["left:min", "right:min"], incumbent="posterior_mean",
        iterations=4, initial=6, seed=4, surrogate="gp-map", **QUIET,
    )  # fmt: skip
    failed = [r for r in result.history if r["status"] == "failed"]
    assert failed and all("out of memory" in r["error"] for r in failed)
    steps = [r for r in result.history if r["phase"] == "bo"]
    assert all("success_probability" in r["diagnostics"] for r in steps)
    # The classifier weights each proposal: below certainty where things failed before.
    risky = [r["diagnostics"]["success_probability"] for r in steps if r["x"]["x"] > 0.75]
    assert all(p < 0.95 for p in risky)


def _hypervolume_2d(points: np.ndarray, reference: np.ndarray) -> float:
    """The area two minimised objectives' ``points`` dominate below ``reference``."""
    points = points[np.all(points < reference, axis=1)]
    area, ceiling = 0.0, reference[1]
    for a, b in points[np.argsort(points[:, 0])]:
        if b < ceiling:
            area += (reference[0] - a) * (ceiling - b)
            ceiling = b
    return area


@pytest.mark.slow  # 1,500 sampled fronts and 10,000 joint draws
def test_noisy_ehvi_matches_a_monte_carlo_reference_over_joint_samples():
    """log_nehvi's value at a candidate against NumPy: joint draws of the latent
    objectives at the baseline and the candidate from a float64 posterior, the
    hypervolume each candidate draw adds to its own sampled front, averaged."""
    from bojax.bo import multiobjective as mo
    from bojax.bo.acquisition import MultiIncumbent, get_acquisition

    settings = bojax.Settings(objectives=["left:min", "right:min"], initial=6, seed=1,
                              surrogate="gp-map", acquisition="log_nehvi", fantasies=1500,
                              num_candidates=256)  # fmt: skip
    state = bojax.init(SPACE, settings)
    for u in np.random.default_rng(2).uniform(size=(7, 2)):
        state = bojax.tell(state, u, two_bowls(SPACE.from_unit(u)))
    models = mo.fit_models(state)
    x, z, surrogate = models.x, models.z, models.surrogate
    reference = np.max(z, axis=0) + 0.5
    chosen = mo.baseline(x, z, surrogate, models.fitted, 2)
    conditioned, boxes = mo.sampled_fronts(
        surrogate, jax.random.key(5), [surrogate.conditioned(f) for f in models.fitted], 2,
        x[chosen], np.zeros((0, 2)), reference, 1500,
    )  # fmt: skip
    candidates = np.array([[0.5, 0.45], [0.25, 0.6], [0.9, 0.1]])
    incumbent = MultiIncumbent(*boxes, found=True, best=0.0, columns=np.zeros(0, np.int32),
                               orient=np.zeros(0), bounds=np.zeros(0))  # fmt: skip
    score = mo.score_function(surrogate, get_acquisition("log_nehvi"))
    values = np.exp(np.asarray(score(candidates, (tuple(conditioned), incumbent, {}))))

    rng = np.random.default_rng(0)
    draws = []
    for j in range(2):
        params = jax.tree.map(lambda a: np.asarray(a[0], np.float64), models.fitted[j].samples)
        amp, ell = params["kernel"]["amplitude"], params["kernel"]["lengthscales"]

        def k(a, b, amp=amp, ell=ell):
            r = np.sqrt(np.sum(((a[:, None] - b[None]) / ell) ** 2, axis=-1))
            return amp * (1 + np.sqrt(5) * r + 5 / 3 * r**2) * np.exp(-np.sqrt(5) * r)

        points = np.concatenate([x[chosen], candidates])
        gram = k(x, x) + params["noise"] * np.eye(len(x))
        cross = k(x, points)
        mean = params["mean"]["value"] + cross.T @ np.linalg.solve(
            gram, z[:, j] - params["mean"]["value"]
        )
        cov = k(points, points) - cross.T @ np.linalg.solve(gram, cross)
        draws.append(rng.multivariate_normal(mean, cov + 1e-10 * np.eye(len(points)), 10000))
    joint = np.stack(draws, axis=-1)  # (draws, b + 3, 2)
    b = len(chosen)
    base = np.array([_hypervolume_2d(f[:b], reference) for f in joint])
    expected = [
        np.mean([_hypervolume_2d(f[[*range(b), b + c]], reference) for f in joint]) - base.mean()
        for c in range(3)
    ]
    np.testing.assert_allclose(values, expected, rtol=0.06)


@pytest.mark.slow  # five fits and a batch under sampled fronts
def test_noisy_ehvi_proposes_batches_with_constraints_and_needs_a_gp():
    settings = bojax.Settings(objectives=["left:min", "right:min"], constraints=["size<=6"],
                              initial=4, seed=0, surrogate="gp-map", acquisition="log_nehvi",
                              num_candidates=256)  # fmt: skip
    state = bojax.init(SPACE, settings)
    for _ in range(5):
        u, state, _ = bojax.ask(state)
        state = bojax.tell(state, u, two_bowls(SPACE.from_unit(u)))
    points, state, infos = bojax.bo.loop.ask_batch(state, 2, pending=np.array([[0.3, 0.5]]))
    assert len(points) == 2 and all(np.isfinite(i["acquisition_value"]) for i in infos)
    with pytest.raises(SettingsError, match="log_nehvi"):  # refused before any fit
        settings.replace(surrogate="bnn-hmc")


def _drawn_front(tmp_path, monkeypatch, objectives, rows, constraints=None):
    """The axes ``bojax plot`` draws for a run of ``rows`` (dicts of metrics)."""
    from bojax.bo.runs import Run
    from bojax.reports import run_figures

    settings = bojax.Settings(objectives=objectives, constraints=constraints)
    records = [{"iteration": k, "status": "ok", "y": y, "x": {}} for k, y in enumerate(rows)]
    run = Run(tmp_path, SPACE, {}, records, [], None, None, settings.metrics)
    drawn = {}
    monkeypatch.setattr(run_figures, "save", lambda fig, path, dpi: drawn.update(fig=fig))
    run_figures.plot_front(run, tmp_path / "front.png")
    return drawn["fig"].axes[0]


@pytest.mark.parametrize("first, where", [("max", "steps-pre"), ("min", "steps-post")])
def test_the_fronts_edge_bounds_the_region_it_dominates(tmp_path, monkeypatch, first, where):
    sign = 1 if first == "min" else -1  # a front trading the first objective for size
    rows = [{"a": sign * 1.0, "size": 100.0}, {"a": sign * 2.0, "size": 10.0}]
    ax = _drawn_front(tmp_path, monkeypatch, {"a": first, "size": "min"}, rows)
    (edge,) = [line for line in ax.lines if line.get_drawstyle().startswith("steps")]
    assert edge.get_drawstyle() == where


def test_parallel_coordinates_span_each_objectives_own_range(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    rows = [{"a": a, "b": b, "c": c} for a, b, c in 0.2 + 0.1 * rng.random((12, 3))]
    rows[0] = {"a": 2e6, "b": 0.2, "c": 0.2}  # one large value: no scale below it
    ax = _drawn_front(tmp_path, monkeypatch, ["a:min", "b:min", "c:min"], rows)
    drawn = np.array([line.get_ydata() for line in ax.lines])
    assert np.allclose(drawn.min(axis=0), 0.0) and np.allclose(drawn.max(axis=0), 1.0)


def test_one_objective_with_constraints_draws_its_evaluations(tmp_path, monkeypatch):
    rows = [{"loss": float(k), "size": float(k % 3)} for k in range(6)]
    ax = _drawn_front(tmp_path, monkeypatch, ["loss:min"], rows, constraints=["size<=1"])
    shown = {line.get_label(): len(line.get_xdata()) for line in ax.lines}
    assert shown == {"feasible": 4, "infeasible": 2, "best feasible": 1}


def test_the_progress_line_shows_the_best_feasible_value():
    from bojax.bo.driver import _Progress

    state = bojax.init(SPACE, bojax.Settings(objectives=["loss:min"], constraints=["size<=1"]))
    for k, (loss, size) in enumerate([(0.1, 5.0), (0.5, 0.5), (0.3, 2.0)]):
        state = bojax.tell(state, np.full(SPACE.dim, 0.2 * k), {"loss": loss, "size": size})
    with _Progress(True, 3, 0) as bar:
        bar.update(state, {"seconds": 0.1, "diagnostics": {}})
        assert bar.progress.tasks[0].fields["best"] == "0.5"  # 0.1 and 0.3 are infeasible


def test_a_resumed_run_whose_outcomes_are_still_undeclared_stops_at_its_first(tmp_path):
    calls = []

    def metrics(point):
        calls.append(point)
        return {"loss": 1.0}

    run = dict(iterations=2, initial=4, out=tmp_path, **QUIET)
    with pytest.raises(bojax.errors.ObjectiveError, match="declare objectives"):
        bojax.minimize(metrics, SPACE, **run)
    with pytest.raises(bojax.errors.ObjectiveError, match="declare objectives"):
        bojax.minimize(metrics, SPACE, resume=True, **run)  # not fixed: one more, not five
    assert len(calls) == 2


@pytest.mark.parametrize(
    "objectives", [["loss:min"], ["a:min", "b:min"], ["a:min", "b:min", "c:min"]]
)
def test_a_front_of_a_run_where_nothing_succeeded_says_so_without_a_warning(
    tmp_path, monkeypatch, objectives
):
    """(matplotlib warned of a legend without entries, review BA)."""
    from bojax.bo.runs import Run
    from bojax.reports import run_figures

    settings = bojax.Settings(objectives=objectives)
    failed = {"status": "failed", "y": None, "x": {}, "error": "boom"}
    records = [{"iteration": k, **failed} for k in range(3)]
    run = Run(tmp_path, SPACE, {}, records, [], None, None, settings.metrics)
    drawn = {}
    monkeypatch.setattr(run_figures, "save", lambda fig, path, dpi: drawn.update(fig=fig))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_figures.plot_front(run, tmp_path / "front.png")
    (ax,) = drawn["fig"].axes
    assert ax.get_legend() is None and "no evaluation succeeded (3 failed)" in ax.get_title()
