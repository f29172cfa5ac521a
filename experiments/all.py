"""Regenerate every report's figures and tables, then judge the reports' claims.

    uv run python experiments/all.py [--quick] [--only NAME ...] [--redo] [--workers N]

Runs the report scripts one after another (each in its own process, its output shown
as it goes), then prints one table of every report's claims with a verdict
(reproduced / partly / not reproduced) and the numbers behind it, and writes it to
``paper_figures/claims.md`` (``claims-quick.md`` with ``--quick``). A report that fails
is not judged from its older summary: its claims are listed as "not judged" and the
table of what made them marks it failed.

Resumable: a report whose ``summary.json`` was made by the current code and settings
(the same ``fingerprint``: the engine, the report's own modules and its settings, not
figure code; see ``bojax.reports.provenance``) is not run again unless ``--redo`` is
given, and each script keeps its own finished runs (BO journals, Figure 11 repeats), so
an interrupted regeneration continues where it stopped. Kept runs record the code that
made them; the ones made by other code are reused with a warning, or rerun with
``--discard-stale`` (a change to bojax may or may not change a run's path; the
fingerprint cannot tell). After a change to figure code only, ``--redo`` re-plots (the
kept runs make that quick). ``--workers N``
runs the BNN report's Figure 11 repeats and the arc-kernel report's BO runs on N local
Dask processes. The arc-kernel report runs Optuna's TPE and SMAC3 beside bojax where
they are installed (``uv sync --group bench``); ``--quick`` runs every script's
few-minute mode into its ``quick`` folders.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "paper_figures"
PEERS = {"tpe": "optuna", "smac": "smac"}  # the arc-kernel report's peers, where installed


@dataclass(frozen=True)
class Report:
    name: str
    module: str  # bojax.reports.<module> holds its claims()
    script: str  # experiments/<script>
    folder: str  # paper_figures/<folder>/ ("{mode}" is "full" or "quick")
    arguments: tuple[str, ...] = ()
    settings: tuple[tuple[str, object], ...] = ()  # the config() arguments they stand for

    def summary_path(self, quick: bool) -> Path:
        mode = "quick" if quick else "full"
        folder = self.folder.format(mode=mode, suffix="-quick" if quick else "")
        return FIGURES / folder / "summary.json"


REPORTS = (
    Report("ensemble design 1", "ensemble_design", "ensemble_design.py",
           "ensemble_design/experiment1{suffix}", ("--experiment", "1"), (("experiment", 1),)),
    Report("ensemble design 2", "ensemble_design", "ensemble_design.py",
           "ensemble_design/experiment2{suffix}", ("--experiment", "2"), (("experiment", 2),)),
    Report("arc kernel", "arc_kernel", "arc_kernel.py", "arc_kernel/{mode}"),
    Report("hybrid exploration", "hybrid_exploration", "hybrid_exploration.py",
           "hybrid_exploration/{mode}"),
    Report("architecture search", "architecture_search", "architecture_search.py",
           "architecture_search/{mode}"),
    Report("BNN surrogate", "bnn_surrogate", "bnn_surrogate.py", "bnn_surrogate/{mode}"),
)  # fmt: skip


def peers_here() -> list[str]:
    """The arc-kernel report's peers that are installed here."""
    return [p for p, package in PEERS.items() if importlib.util.find_spec(package)]


def expected_fingerprint(report: Report, quick: bool) -> str:
    """The fingerprint a summary made now by ``command(report, quick, ...)`` would have:
    the present code's and the settings the script would run with."""
    from bojax.reports.provenance import code_fingerprint, fingerprint

    module = importlib.import_module(f"bojax.reports.{report.module}")
    extra = {"peers": peers_here()} if report.module == "arc_kernel" else {}
    cfg = module.config(quick=quick, **dict(report.settings), **extra)
    return fingerprint(code_fingerprint(report.module), cfg)


def is_current(path: Path, fingerprint: str) -> bool:
    """Whether ``path`` is a summary whose provenance has ``fingerprint``."""
    try:
        block = json.loads(path.read_text()).get("provenance") or {}
    except (OSError, json.JSONDecodeError):
        return False
    return block.get("fingerprint") == fingerprint


def stale_runs(report: Report, quick: bool) -> tuple[list[Path], int]:
    """The report's kept runs made by other code than the report's present code (a
    report module that keeps runs has ``kept_runs(folder)``), and how many kept runs do
    not record their code."""
    from bojax.reports.provenance import code_fingerprint

    module = importlib.import_module(f"bojax.reports.{report.module}")
    if not hasattr(module, "kept_runs"):
        return [], 0
    code = code_fingerprint(report.module)
    kept = module.kept_runs(report.summary_path(quick).parent)
    stale = [path for path, made_by in kept if made_by is not None and made_by != code]
    return stale, sum(made_by is None for _, made_by in kept)


def discard(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def command(report: Report, quick: bool, workers: int | None) -> list[str]:
    arguments = [sys.executable, str(ROOT / "experiments" / report.script), *report.arguments]
    if quick:
        arguments.append("--quick")
    if report.module == "arc_kernel" and peers_here():
        arguments += ["--peers", *peers_here()]
    if report.module in ("bnn_surrogate", "arc_kernel") and workers:
        arguments += ["--workers", str(workers)]
    return arguments


def judge(reports: list[Report], quick: bool, failed: dict[str, int] | None = None) -> list:
    """Every claim of the reports whose summaries exist. A report in ``failed`` (name:
    exit status) failed in this regeneration: its summary, if any, is an older run's, so
    its claims are listed as not judged; so is a report whose claims cannot be read from
    its summary."""
    from bojax.reports.claims import not_judged

    failed = failed or {}
    found = []
    for report in reports:
        path = report.summary_path(quick)
        module = importlib.import_module(f"bojax.reports.{report.module}")
        try:
            claims = module.claims(json.loads(path.read_text())) if path.exists() else []
        except (KeyError, TypeError, ValueError, IndexError) as error:  # ValueError: JSON
            found.append(not_judged(report.name, "(the report's claims)", (
                f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} cannot be "
                f"judged: {type(error).__name__}: {error}"
            )))  # fmt: skip
            continue
        if report.name in failed:
            why = f"the report failed in this run (exit {failed[report.name]}); " + (
                "its summary.json is an earlier run's" if claims else "no summary.json"
            )
            claims = [not_judged(c.report, c.claim, why) for c in claims] or [
                not_judged(report.name, "(the report's claims)", why)
            ]
        found += claims
    return found


def provenance_table(
    reports: list[Report], quick: bool, failed: dict[str, int] | None = None
) -> str:
    """Which code, libraries and device made each report's summary, as Markdown; a
    report in ``failed`` (name: exit status) is marked as failed in this run."""
    lines = [
        "| report | commit | code | started | wall | device | JAX | overrides |",
        "|---|---|---|---|---|---|---|---|",
    ]
    failed = failed or {}
    for report in reports:
        path = report.summary_path(quick)
        try:
            block = json.loads(path.read_text()).get("provenance") if path.exists() else None
        except ValueError:
            block = None
        name = report.name
        if name in failed:
            name += f" (**FAILED** in this run, exit {failed[name]}; an earlier summary)"
        if block is None:
            lines.append(f"| {name} | (not recorded) | | | | | | |")
            continue
        commit = (block["git_commit"] or "?")[:10] + (" (dirty)" if block["git_dirty"] else "")
        overrides = ", ".join(f"{k}={v}" for k, v in block.get("overrides", {}).items())
        lines.append(
            f"| {name} | {commit} | {block['code_fingerprint']} | {block['started']} "
            f"| {block['wall_seconds'] / 60:.1f} min | {block['device']} | {block['jax']} "
            f"| {overrides or '-'} |"
        )
    return "\n".join(lines) + "\n"


def print_claims(claims: list) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="The reports' claims", show_lines=True)
    for column in ("report", "claim", "verdict", "evidence"):
        table.add_column(column, overflow="fold")
    colour = {"reproduced": "green", "partly": "yellow", "not reproduced": "red"}
    colour["not judged"] = "magenta"
    for c in claims:
        table.add_row(c.report, c.claim, f"[{colour[c.verdict]}]{c.verdict}[/]", c.evidence)
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    from bojax.reports import positive  # (an argparse type: a whole number >= 1)

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every script's few-minute mode")
    parser.add_argument(
        "--only", nargs="+", choices=[r.name for r in REPORTS], metavar="NAME",
        help="these reports only (names as in the table: 'arc kernel', ...)",
    )  # fmt: skip
    parser.add_argument("--redo", action="store_true", help="rerun current summaries too")
    parser.add_argument(
        "--workers", type=positive, help="Dask processes for the BNN and arc-kernel runs"
    )
    parser.add_argument("--judge-only", action="store_true", help="run nothing, judge claims")
    parser.add_argument(
        "--discard-stale", action="store_true",
        help="rerun kept runs (BO runs, Figure 11 repeats) made by other bojax code",
    )  # fmt: skip
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from bojax.reports.claims import markdown

    chosen = [r for r in REPORTS if args.only is None or r.name in args.only]
    failed: dict[str, int] = {}  # report: exit status
    started = time.perf_counter()
    for index, report in enumerate(chosen, 1):
        heading = f"[{index}/{len(chosen)}] {report.name}"
        if args.judge_only:
            continue
        stale, unrecorded = stale_runs(report, args.quick)
        if stale and args.discard_stale:
            discard(stale)
            print(f"{heading}: discarded {len(stale)} kept runs made by other code", flush=True)
        elif stale or unrecorded:
            print(
                f"{heading}: reusing {len(stale)} kept runs made by other bojax code and "
                f"{unrecorded} that do not record it (--discard-stale reruns the former)",
                flush=True,
            )
        fingerprint = expected_fingerprint(report, args.quick)
        if not args.redo and is_current(report.summary_path(args.quick), fingerprint):
            print(f"{heading}: current (fingerprint {fingerprint}), skipped", flush=True)
            continue
        elapsed = time.perf_counter() - started
        print(f"\n{heading}: running ({elapsed / 60:.1f} min so far)", flush=True)
        tick = time.perf_counter()
        code = subprocess.call(command(report, args.quick, args.workers), cwd=ROOT)
        status = "done" if code == 0 else f"FAILED (exit {code})"
        print(f"{heading}: {status} in {(time.perf_counter() - tick) / 60:.1f} min", flush=True)
        if code != 0:
            failed[report.name] = code

    claims = judge(chosen, args.quick, failed)
    print()
    print_claims(claims)
    out = FIGURES / ("claims-quick.md" if args.quick else "claims.md")
    header = (
        "# The reports' claims\n\nWritten by `experiments/all.py"
        + (" --quick" if args.quick else "")
        + "` from each report's `summary.json`; each verdict follows from the numbers by"
        " the rule in its row.\n\n"
    )
    if args.only is None:
        made = "\n## What made them\n\n" + provenance_table(chosen, args.quick, failed)
        out.write_text(header + markdown(claims) + made)
        print(f"wrote {out}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    from bojax.reports.peers import fixed_hash_seed

    fixed_hash_seed()  # SMAC3's runs follow Python's string hashes
    sys.exit(main())
