"""Figures of any run folder, from its journal alone (what ``bojax plot RUN`` writes).

* ``progress.png``: every evaluation's value and the best so far (failures marked on the
  axis), the initial design shaded;
* ``parameters.png``: each parameter against the evaluation number (gaps where a
  conditional parameter did not exist), the best evaluation and the failures marked;
* ``slices.png``: the surrogate's posterior mean +- 2 sd along each parameter that
  exists at the best point, the others held at the best point's values, failed
  evaluations' coordinates as red ticks on the axis;
* ``slice2d.png``: mean and sd over the two parameters whose 1-D slices vary most, with
  the failed evaluations, and where something failed the failure classifier's
  P(success) over the same slice (:func:`bojax.bo.loop.success_predictor`).

A run with several metrics (``objectives``) gets, in place of ``progress.png`` and the
slices, ``hypervolume.png`` (the feasible hypervolume after each evaluation) and
``front.png``: with two objectives every evaluation in the objectives' plane, the
Pareto set joined as a staircase and infeasible ones hollow; with three or more, parallel
coordinates of every feasible evaluation's objectives (each scaled to [0, 1]), the
Pareto set drawn bold.

The surrogate is the run's own (its ``run.json`` settings), refitted to the journal's
successful evaluations as the run's next ``ask`` would (:func:`bojax.bo.loop.predict`).

A run folder is data anyone may have edited, and its settings and space decide how much
work the figures take. So the refit's settings are checked before any figure is drawn
(:data:`REFIT_LIMITS`: a SettingsError naming ``run.json`` and the key; a journal longer
than a refit takes gets its other figures, without slices), and the figures draw at
most :data:`MAX_PANELS` parameters and :data:`MAX_TICKS` labels per axis.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import fields
from pathlib import Path

import numpy as np

from bojax.bo.runs import Run
from bojax.errors import BojaxError, JournalError, RunFolderError, SettingsError, is_count
from bojax.reports.figures import pyplot, save
from bojax.terminal import plain

GRID = 60  # points along a 1-D slice
GRID_2D = 30  # per axis of the 2-D slice

#: The most a run folder may ask of the refit. Real runs stay far inside: the reports'
#: largest keeps 5 000 draws (``samples``) of 30 evaluations; 10**12 would never end.
REFIT_LIMITS = {"samples": 20_000, "burn_in": 20_000, "evaluations": 5_000}
#: Evaluations a refit takes where the run is past its ``exact_limit``: the model is then
#: a local GP on ``local_points`` of them, and reading the journal is what grows (10,000
#: evaluations at d = 20: 14 s for every figure).
LOCAL_REFIT_EVALUATIONS = 20_000
#: Parameters drawn per figure (the first ones): the figures grow with their count, and
#: past some 1 000 parameters matplotlib cannot allocate the image at all.
MAX_PANELS = 48
#: Every figure bojax plot may write (those a plot does not redraw are named if present).
FIGURE_NAMES = (
    "progress.png", "parameters.png", "slices.png", "slice2d.png", "curves.png",
    "hypervolume.png", "front.png",
)  # fmt: skip
#: Labelled ticks per axis (a categorical with thousands of choices labels every k-th).
MAX_TICKS = 40


#: The longest a name is drawn as a title or an axis label: a longer one ran across
#: its neighbours' panels and off the figure's edge (review CF).
LONGEST_NAME = 40


def _text(value: object, limit: int | None = None) -> str:
    """A run folder's text as a label: control characters shown as codes, and ``$``
    escaped, so matplotlib does not parse it as mathtext (an odd ``$`` fails the draw);
    past ``limit`` characters, cut with an ellipsis."""
    text = plain(value)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "\N{HORIZONTAL ELLIPSIS}"
    return text.replace("$", r"\$")


def _name(value: object) -> str:
    """A parameter's or metric's name as a title or an axis label."""
    return _text(value, LONGEST_NAME)


def _whole_numbers(ax, axis: str = "x") -> None:
    """Ticks at whole numbers only on an axis that counts (evaluations, steps)."""
    from matplotlib.ticker import MaxNLocator

    # (min_n_ticks=1: a single evaluation's axis, -0.5 to 0.5, holds one whole number)
    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def _position(p, value):
    """Where a value sits on its axis: a categorical's choice index, else the value."""
    return p.index(value) if p.categorical else value


def _values(run: Run, p) -> np.ndarray:
    values = [_position(p, r["x"][p.name]) if p.name in r["x"] else np.nan for r in run.records]
    return np.array(values, dtype=np.float64)


def _ticked(count: int) -> np.ndarray:
    """Which of ``count`` values get a labelled tick: all, or :data:`MAX_TICKS` spread
    evenly (first and last included)."""
    if count <= MAX_TICKS:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, MAX_TICKS).round().astype(int))


def _short_log_ticks(low: float, high: float, integer: bool) -> list[float]:
    """Ticks for a log axis on ``[low, high]`` spanning under two decades: the bounds, the
    1-2-5 values between them and, on a range too short for those, a few geometric steps;
    whole numbers only for an integer (matplotlib's own locator fell back to linear ticks
    at 3.5, 4.5 there; review CN)."""
    values = {low, high}
    for power in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        values |= {m * 10.0**power for m in (1, 2, 5) if low <= m * 10.0**power <= high}
    if len(values) < 3:
        values |= set(np.geomspace(low, high, 5).tolist())
    if integer:
        values = {float(round(v)) for v in values}
    return sorted(values)


def _scale(ax, p, axis: str) -> None:
    """A log axis for log-spaced parameters; the choices' names for a categorical, the
    grid's values for an ordinal."""
    if getattr(p, "log", False):
        _log_axis(ax, axis)
        low, high = getattr(p, "low", None), getattr(p, "high", None)  # (an ordinal: none)
        if low is not None and high <= 100 * low:  # 10^0 alone was labelled (review CL)
            from matplotlib.ticker import NullLocator

            ticks = _short_log_ticks(low, high, p.kind == "integer")
            getattr(ax, f"set_{axis}ticks")(ticks, [f"{v:.3g}" for v in ticks])
            getattr(ax, f"{axis}axis").set_minor_locator(NullLocator())
    if p.categorical:
        ticks = _ticked(len(p.choices))
        getattr(ax, f"set_{axis}ticks")(ticks, [_text(p.choices[k]) for k in ticks])
    elif not p.continuous:  # an ordinal grid: its values as the ticks
        values = p.decode(p.grid())[_ticked(len(p.grid()))]
        getattr(ax, f"set_{axis}ticks")(values, [f"{v:g}" for v in values])
    elif p.kind == "integer" and not getattr(p, "log", False):
        _whole_numbers(ax, axis)  # (layers ticked at 1.5 read as a value it can take)


def plot_progress(run: Run, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    n = np.arange(len(run.records))
    y = np.array([r["y"] if r["status"] == "ok" else np.nan for r in run.records], float)
    initial = sum(r["phase"] == "initial" for r in run.records)
    if initial:
        ax.axvspan(-0.5, initial - 0.5, color="0.9", label="initial design")
    succeeded = bool(np.isfinite(y).any())
    ax.plot(n, y, "o", ms=4, color="tab:blue", label="evaluation" if succeeded else "_")
    ax.step(n, run.best_so_far(), where="post", color="tab:orange",
            label="best so far" if succeeded else "_")  # fmt: skip
    failed = [r["iteration"] for r in run.failures]
    if failed:  # on the axes' bottom edge: a failure has no value (an x at 0 read as one)
        edge = ax.get_xaxis_transform()
        ax.plot(failed, np.full(len(failed), 0.03), "x", color="tab:red", label="failed",
                transform=edge, clip_on=False)  # fmt: skip
    if not succeeded:
        ax.set_title(f"no evaluation succeeded ({len(failed)} failed)", fontsize=9)
        ax.set_yticks([])
    ax.set_xlabel("evaluation")
    _whole_numbers(ax)
    ax.set_ylabel("objective" + (" (maximised)" if run.maximize else " (minimised)"))
    ax.legend(loc="best", fontsize=8)
    _save(fig, path, dpi=120)


def plot_hypervolume(run: Run, path: Path) -> None:
    plt = pyplot()
    front = run.front()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.step(np.arange(len(run.records)), front["hypervolume"], where="post", color="tab:orange")
    initial = sum(r["phase"] == "initial" for r in run.records)
    if initial:
        ax.axvspan(-0.5, initial - 0.5, color="0.9", label="initial design")
        ax.legend(loc="best", fontsize=8)
    reference = front["reference_point"]
    where = "" if reference is None else ", ".join(f"{v:.4g}" for v in reference)
    ax.set_title(_text(f"hypervolume of the feasible evaluations (reference point {where})"),
                 fontsize=9)  # fmt: skip
    ax.set_xlabel("evaluation")
    _whole_numbers(ax)
    ax.set_ylabel("hypervolume")
    _save(fig, path, dpi=120)


def plot_front(run: Run, path: Path) -> None:
    """The feasible evaluations and the Pareto set: against each other for two
    objectives, in parallel coordinates for more, against the evaluation for one (with
    constraints)."""
    plt = pyplot()
    metrics = run.metrics
    names = [name for name, _ in metrics.objectives]
    ok = [r for r in run.records if r["status"] == "ok"]
    values = np.array([metrics.row(r["y"]) for r in ok]).reshape(-1, len(metrics.columns))
    feasible = metrics.feasible(values)
    on_front = {p["iteration"] for p in run.front()["pareto"]}
    front = np.array([r["iteration"] in on_front for r in ok], dtype=bool)
    objectives = values[:, : len(names)]
    if len(names) == 1:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        n = np.array([r["iteration"] for r in ok], dtype=int)
        if feasible.any():  # (no legend entry for what is not drawn)
            ax.plot(n[feasible], objectives[feasible, 0], "o", ms=5, color="tab:blue",
                    label="feasible")  # fmt: skip
        if (~feasible).any():
            ax.plot(n[~feasible], objectives[~feasible, 0], "o", ms=5, mfc="none", color="0.5",
                    label="infeasible")  # fmt: skip
        if front.any():
            ax.plot(n[front], objectives[front, 0], "*", ms=12, color="tab:orange",
                    label="best feasible")  # fmt: skip
        ax.set_xlabel("evaluation")
        _whole_numbers(ax)
        ax.set_ylabel(f"{_name(names[0])} ({metrics.objectives[0][1]})")
        _legend_or_why(ax, len(run.records))
    elif len(names) == 2:
        fig, ax = plt.subplots(figsize=(6, 5))
        if (feasible & ~front).any():
            ax.plot(*objectives[feasible & ~front].T, "o", ms=5, color="tab:blue",
                    label="feasible")  # fmt: skip
        if (~feasible).any():
            ax.plot(*objectives[~feasible].T, "o", ms=5, mfc="none", color="0.5",
                    label="infeasible")  # fmt: skip
        if front.any():
            order = np.argsort(objectives[front, 0])
            # The dominated region lies right of a point whose first objective is minimised:
            # the front's edge keeps each point's height until the next point (post).
            where = "post" if metrics.signs[0] > 0 else "pre"
            ax.step(*objectives[front][order].T, where=where, color="tab:orange", alpha=0.6)
            ax.plot(*objectives[front].T, "*", ms=11, color="tab:orange", label="Pareto set")
        labels = [f"{_name(n)} ({d})" for n, d in metrics.objectives]  # the direction kept
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        _legend_or_why(ax, len(run.records))
    else:
        fig, ax = plt.subplots(figsize=(1.6 * len(names) + 3, 4.5))
        shown = objectives[feasible]
        low = shown.min(axis=0) if len(shown) else np.zeros(len(names))
        high = shown.max(axis=0) if len(shown) else np.ones(len(names))
        scaled = (shown - low) / np.where(high > low, high - low, 1.0)
        axis = np.arange(len(names))
        for row, bold in zip(scaled, front[feasible], strict=True):
            ax.plot(axis, row, color="tab:orange" if bold else "0.7",
                    lw=2.0 if bold else 0.8, zorder=3 if bold else 1)  # fmt: skip
        ax.set_xticks(axis, [f"{_name(n)}\n({d})" for n, d in metrics.objectives], fontsize=8)
        ax.set_ylabel("scaled to [0, 1] over the feasible evaluations")
        ax.set_title("feasible evaluations; the Pareto set in orange", fontsize=9)
        if not ok:
            _legend_or_why(ax, len(run.records))
    _save(fig, path, dpi=120)


def _legend_or_why(ax, evaluations: int) -> None:
    """The legend of what was drawn; with nothing drawn (no evaluation succeeded), a
    title saying so instead (matplotlib warns of a legend without entries)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    else:
        ax.set_title(f"no evaluation succeeded ({evaluations} failed): no front", fontsize=9)


def _log_axis(ax, axis: str) -> None:
    """A log scale without labels on minor ticks (they overlap on short ranges)."""
    from matplotlib.ticker import NullFormatter

    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"{axis}axis").set_minor_formatter(NullFormatter())


def _shown(parameters: list) -> tuple[list, str]:
    """The first :data:`MAX_PANELS` of ``parameters``, and a title note when some are
    left out."""
    if len(parameters) <= MAX_PANELS:
        return parameters, ""
    return parameters[:MAX_PANELS], f"the first {MAX_PANELS} of {len(parameters)} parameters"


def _panels(count: int):
    plt = pyplot()
    columns = min(4, count)
    rows = math.ceil(count / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.4 * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def plot_parameters(run: Run, path: Path) -> None:
    best = run.best()
    parameters, note = _shown(list(run.space.parameters))
    fig, axes = _panels(len(parameters))
    if note:
        fig.suptitle(note, fontsize=10)
    n = np.arange(len(run.records))
    status = np.array([r["status"] for r in run.records])
    stepwise = run.stepwise
    done = "trained to the end" if stepwise else "succeeded"
    for ax, p in zip(axes, parameters, strict=True):
        values = _values(run, p)
        ok = status == "ok"  # (an empty selection still gets its legend entry)
        ax.plot(n[ok], values[ok], ".", ms=5, label=done if ok.any() else "_")
        # A training the scheduler stopped early is not a failure: grey, as in curves.png.
        stopped = status == "stopped"
        if stopped.any():
            ax.plot(n[stopped], values[stopped], ".", ms=4, color="0.6", label="stopped")
        failed = status == "failed"
        if failed.any():
            ax.plot(n[failed], values[failed], "x", ms=5, color="tab:red", label="failed")
        if best is not None and p.name in best["x"]:
            ax.plot(best["iteration"], _position(p, best["x"][p.name]), "*", ms=12,
                    color="tab:orange", label="best")  # fmt: skip
        _scale(ax, p, "y")
        if not np.isfinite(values).any():  # a conditional parameter no evaluation used
            ax.set_yticks([])
            ax.text(0.5, 0.5, "not used by any evaluation\n(its condition never held)",
                    ha="center", va="center", fontsize=8, transform=ax.transAxes)  # fmt: skip
        ax.set_xlim(-0.5, len(run.records) - 0.5)  # the same evaluations on every panel
        ax.set_title(_name(p.name), fontsize=9)
        ax.set_xlabel("evaluation", fontsize=8)
        _whole_numbers(ax)
    if axes and (status != "ok").any():  # what the marks mean, once
        axes[0].legend(loc="best", fontsize=7)
    _save(fig, path, dpi=110)


def design_curves(records: list[dict]) -> list[tuple[list, str]]:
    """Each design's whole curve and its last record's status: freeze-thaw journals one
    record per segment (the design in its diagnostics), the other schedulers one per
    design, so a paused segment is not drawn as a training stopped."""
    designs: dict[object, tuple[list, str]] = {}
    for k, record in enumerate(records):
        key = (record.get("diagnostics") or {}).get("design", ("record", k))
        curve = designs.get(key, ([], ""))[0] + list(record.get("curve") or [])
        designs[key] = (curve, record["status"])
    return list(designs.values())


def best_against_steps(records: list[dict]) -> tuple[list, list, list]:
    """``(steps spent, best value reported at any step, best of the trainings ended
    complete)`` after each recorded step, from 0. A record's steps charged (repeats of a
    training started again or continued from an older checkpoint included) end at its
    last step."""
    spent, best_any, best_done = 0, math.inf, math.inf
    xs, any_values, done_values = [0], [math.nan], [math.nan]
    for record in records:
        curve = record.get("curve") or []
        last = curve[-1][0] if curve else 0
        diagnostics = record.get("diagnostics") or {}
        charged = diagnostics.get("charged", last - diagnostics.get("from_step", 0))
        for step, value in curve:
            best_any = min(best_any, value)
            xs.append(spent + charged - (last - step))
            any_values.append(best_any)
            done_values.append(best_done if math.isfinite(best_done) else math.nan)
        spent += charged
        if record["status"] == "ok":
            best_done = min(best_done, record["y"])
            done_values[-1] = best_done
    return xs, any_values, done_values


def plot_curves(run: Run, path: Path) -> None:
    """A step-wise run: every design's learning curve (trained to the end, stopped early
    with an x where it stopped, or failed, with a dot where it failed), and the best value
    against the steps spent. A curve of one report is a dot too (a line of one point
    draws nothing)."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = {
        "ok": ("tab:blue", 1.2, 0.9),
        "stopped": ("0.55", 0.7, 0.5),
        "failed": ("tab:red", 0.7, 0.6),
    }
    drawn = set()  # the legend names only the kinds of curve the run has
    for curve, status in design_curves(run.records):
        curve = np.array(curve, float).reshape(-1, 2)
        if not len(curve):
            continue
        drawn.add(status)
        color, width, alpha = styles[status]
        left.plot(curve[:, 0], curve[:, 1], color=color, lw=width, alpha=alpha)
        if status == "stopped":
            left.plot(curve[-1, 0], curve[-1, 1], "x", ms=4, color=color)
        elif status == "failed" or len(curve) == 1:
            left.plot(curve[-1, 0], curve[-1, 1], "o", ms=3, color=color)
    for status, (color, width, _) in styles.items():
        if status in drawn or not drawn:
            label = {"ok": "trained to the end"}.get(status, status)
            left.plot([], [], color=color, lw=width, label=label)
    left.set(xlabel="step", ylabel="reported value (minimised)", title="learning curves")
    _whole_numbers(left)
    left.legend(loc="best", fontsize=8)
    xs, any_values, done_values = best_against_steps(run.records)
    right.step(xs, any_values, where="post", color="tab:orange", label="best reported at any step")
    complete = any(r["status"] == "ok" for r in run.records)  # else no line: no entry
    right.step(xs, done_values, where="post", color="tab:blue",
               label="best trained to the end" if complete else "_")  # fmt: skip
    right.set(xlabel="steps spent", ylabel="best so far", title="best against steps spent")
    right.legend(loc="best", fontsize=8)
    if not any(len(curve) for curve, _ in design_curves(run.records)):  # empty axes mislead
        for ax in (left, right):
            ax.get_legend().remove()
            ax.set(xticks=[], yticks=[])
        left.text(0.5, 0.5, f"no training reported a value\n({len(run.records)} failed)",
                  ha="center", va="center", transform=left.transAxes)  # fmt: skip
    _save(fig, path, dpi=120)


def refit_limit(run: Run) -> int:
    """The evaluations a refit of ``run`` takes: :data:`LOCAL_REFIT_EVALUATIONS` where its
    successes pass its ``exact_limit`` (a local fit), else ``REFIT_LIMITS``'s."""
    exact_limit = run.settings.get("exact_limit", 300)  # (journals omit the default)
    successes = sum(r["status"] == "ok" for r in run.records)
    if is_count(exact_limit) and successes > exact_limit:
        return LOCAL_REFIT_EVALUATIONS
    return REFIT_LIMITS["evaluations"]


def too_long_to_refit(run: Run) -> bool:
    """Whether the run has more evaluations than a refit takes: its other figures are
    drawn, without the slices."""
    return len(run.records) > refit_limit(run)


def refit_settings(run: Run):
    """The run's :class:`~bojax.bo.settings.Settings`, checked as untrusted data before
    the refit: a SettingsError names ``run.json`` and the key of an unknown, mistyped or
    out-of-range setting, or of one past :data:`REFIT_LIMITS`; a JournalError refuses a
    journal of more evaluations than a refit takes."""
    from bojax.bo.settings import Settings, without_inert

    where = run.folder / "run.json"
    known = {spec.name for spec in fields(Settings)}
    unknown = sorted(str(key) for key in run.settings if key not in known)
    if unknown:
        raise SettingsError(f"{where}: unknown setting {unknown[0]!r}")
    for key in ("samples", "burn_in"):
        value = run.settings.get(key)
        if is_count(value) and value > REFIT_LIMITS[key]:
            raise SettingsError(
                f"{where}: {key} = {value} is more than bojax plot refits (at most "
                f"{REFIT_LIMITS[key]}); plot it with --no-slices"
            )
    if too_long_to_refit(run):
        raise JournalError(
            f"{run.folder / 'journal.jsonl'}: {len(run.records)} evaluations are more than "
            f"bojax plot refits (at most {refit_limit(run)}); plot it with --no-slices"
        )
    try:
        return Settings(**without_inert(run.settings))
    except BojaxError as error:  # each names its setting; the file is ours to name
        raise SettingsError(f"{where}: {error}") from error


def _state(run: Run):
    from bojax.bo.driver import tell_record
    from bojax.bo.loop import init

    state = init(run.space, refit_settings(run))
    for record in run.records:
        state = tell_record(state, record)
    return state


def _slice_rows(run: Run, centre: np.ndarray, j: int, grid: np.ndarray) -> np.ndarray:
    rows = np.repeat(centre[None], len(grid), axis=0)
    rows[:, j] = grid
    return run.space.snap(rows)  # integers to their bins, relevance from the new values


def plot_slices(run: Run, slices: Path, slice2d: Path) -> list[Path]:
    """1-D slices through the best point and a 2-D slice over the two liveliest axes
    (when two parameters exist there); returns the paths written."""
    from bojax.bo.loop import predictor, success_predictor

    best = run.best()
    if best is None:
        raise ValueError("no successful evaluation: nothing to slice through")
    state = _state(run)
    predict = predictor(state)  # one fit for every slice
    succeeds = success_predictor(state)  # None when nothing failed
    failures = [r["x"] for r in run.failures]
    centre = run.space.snap(np.asarray(best["u"], dtype=np.float64))
    live, note = _shown([j for j, p in enumerate(run.space.parameters) if p.name in best["x"]])
    grid = np.linspace(0.0, 1.0, GRID)
    curves = {}
    for j in live:
        rows = _slice_rows(run, centre, j, grid)
        mean, sd = predict(rows)
        values = run.space.parameters[j].decode(np.clip(rows[:, j], 0.0, 1.0))
        if not run.space.parameters[j].categorical:  # an ordinal of ints and floats: objects
            values = np.asarray(values, np.float64)
        curves[j] = (values, mean, sd)
    fig, axes = _panels(len(live))
    for ax, j in zip(axes, live, strict=True):
        p = run.space.parameters[j]
        values, mean, sd = curves[j]
        if p.categorical:  # one prediction per choice: points with 2 sd bars
            values = np.array([p.index(v) for v in values], dtype=np.float64)
            ax.errorbar(values, mean, 2 * sd, fmt="o", color="tab:blue", ms=4)
        else:
            ax.plot(values, mean, color="tab:blue")
            ax.fill_between(values, mean - 2 * sd, mean + 2 * sd, color="tab:blue", alpha=0.2)
        ax.plot(_position(p, best["x"][p.name]), best["y"], "*", ms=12, color="tab:orange")
        where = [_position(p, x[p.name]) for x in failures if p.name in x]
        if where:  # failed evaluations' coordinates, as a rug on the axis
            ax.plot(where, np.zeros(len(where)), "|", ms=10, color="tab:red",
                    transform=ax.get_xaxis_transform())  # fmt: skip
        _scale(ax, p, "x")
        ax.set_title(_name(p.name), fontsize=9)
    title = "posterior mean +- 2 sd through the best point"
    fig.suptitle(title + (f" ({note})" if note else ""), fontsize=10)
    _save(fig, slices, dpi=110)

    ordered = [j for j in live if not run.space.parameters[j].categorical]
    if len(ordered) < 2:  # the 2-D slice needs two ordered axes
        return [slices]
    spread = {j: float(np.ptp(curves[j][1])) for j in ordered}
    a, b = sorted(ordered, key=lambda j: -spread[j])[:2]
    axis = np.linspace(0.0, 1.0, GRID_2D)
    ua, ub = np.meshgrid(axis, axis, indexing="xy")
    rows = np.repeat(centre[None], ua.size, axis=0)
    rows[:, a], rows[:, b] = ua.ravel(), ub.ravel()
    rows = run.space.snap(rows)
    mean, sd = predict(rows)
    pa, pb = run.space.parameters[a], run.space.parameters[b]
    va, vb = pa.decode(np.clip(rows[:, a], 0, 1)), pb.decode(np.clip(rows[:, b], 0, 1))
    fields = [(mean, "posterior mean"), (sd, "posterior sd")]
    if succeeds is not None:
        fields.append((succeeds(rows), "P(success)"))
    fig, axes = pyplot().subplots(1, len(fields), figsize=(5 * len(fields), 4), squeeze=False)
    failed = [x for x in failures if pa.name in x and pb.name in x]
    for ax, (field, title) in zip(axes[0], fields, strict=True):
        image = ax.tricontourf(va, vb, field, levels=20)
        fig.colorbar(image, ax=ax)
        ax.plot(best["x"][pa.name], best["x"][pb.name], "*", ms=12, color="tab:orange")
        if failed:
            ax.plot([x[pa.name] for x in failed], [x[pb.name] for x in failed], "x",
                    color="tab:red", ms=6)  # fmt: skip
        ax.set_xlabel(_name(pa.name))
        ax.set_ylabel(_name(pb.name))
        ax.set_title(title, fontsize=10)
        _scale(ax, pa, "x")
        _scale(ax, pb, "y")
    _save(fig, slice2d, dpi=110)
    return [slices, slice2d]


def _made(out: Path) -> None:
    """Make the figures' folder, or a :class:`RunFolderError` saying why not."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file of that name, no permission
        raise RunFolderError(
            f"cannot make the figures' folder {out}: {error.strerror or error}"
        ) from None


def plot_run(run: Run, out: Path, slices: bool = True) -> list[Path]:
    """Write the run's figures into ``out``; returns their paths. A folder whose settings
    the refit would not take is refused before any figure is written; one the figures
    cannot be written into (read-only, full, a folder in a figure's place) is a
    :class:`RunFolderError` saying so."""
    with warnings.catch_warnings():
        # A name in a script the font lacks (CJK) draws as boxes; matplotlib said so for
        # every glyph, twice, among the command's own lines.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        return _plot_run(run, out, slices)


def _save(fig, path: Path, dpi: int) -> None:
    """Write one figure, or a :class:`RunFolderError` saying why it cannot be written
    (savefig's OSError was a traceback; review CF). Only the write is guarded: an error
    of the refit's own is not a failed write (review CJ)."""
    try:
        save(fig, path, dpi=dpi)
    except OSError as error:
        where = error.filename or path
        raise RunFolderError(f"cannot write {where}: {error.strerror or error}") from None


def _plot_run(run: Run, out: Path, slices: bool) -> list[Path]:
    if run.metrics is not None:  # several metrics: the front, not a posterior slice
        _made(out)
        paths = [out / "hypervolume.png", out / "front.png", out / "parameters.png"]
        plot_hypervolume(run, paths[0])
        plot_front(run, paths[1])
        plot_parameters(run, paths[2])
        return paths
    if run.stepwise:  # curves, no refit
        _made(out)
        paths = [out / "curves.png", out / "parameters.png"]
        plot_curves(run, paths[0])
        plot_parameters(run, paths[1])
        return paths
    # The refit predicts as the run would have: not before its initial design is in (a
    # run stopped inside a large design gets no slices, as one with no success).
    designed = len(run.records) >= int(run.settings.get("initial", 0))
    refit = slices and designed and run.best() is not None and not too_long_to_refit(run)
    if refit:
        refit_settings(run)
    _made(out)
    paths = [out / "progress.png", out / "parameters.png"]
    plot_progress(run, paths[0])
    plot_parameters(run, paths[1])
    if refit:
        paths += plot_slices(run, out / "slices.png", out / "slice2d.png")
    return paths
