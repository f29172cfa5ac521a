"""The reports' claims, judged from a reproduction's ``summary.json``.

Each report module has ``claims(summary) -> list[Claim]``: the report's claim in our
words, a verdict computed from the summary's numbers by a rule stated in the claim's
``rule``, and those numbers. ``experiments/all.py`` prints them as one table and writes
``paper_figures/claims.md``; the rules are deliberately simple so that a reader can
check a verdict against the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

VERDICTS = ("reproduced", "partly", "not reproduced", "not judged")
# "not judged": the summary cannot settle the claim (an arm it needs was not run, or the
# report failed in this regeneration and its summary is an older one).
NOT_JUDGED = VERDICTS[3]


@dataclass(frozen=True)
class Claim:
    """One claim of a report and how the reproduction settles it."""

    report: str
    claim: str  # the report's claim, paraphrased
    verdict: str  # one of VERDICTS
    evidence: str  # the numbers the verdict rests on
    rule: str  # how the verdict follows from them

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


def verdict(full: bool, partial: bool = False) -> str:
    """``reproduced`` if ``full``, else ``partly`` if ``partial``, else ``not reproduced``."""
    return VERDICTS[0] if full else VERDICTS[1] if partial else VERDICTS[2]


def not_judged(report: str, claim: str, why: str) -> Claim:
    """A claim the summary cannot settle, saying ``why`` (as its evidence)."""
    return Claim(report, claim, NOT_JUDGED, why, "judged only from a complete, current summary")


def markdown(claims: list[Claim]) -> str:
    """The claims as a Markdown table (report, claim, verdict, evidence, rule)."""
    lines = ["| report | claim | verdict | evidence | rule |", "|---|---|---|---|---|"]
    for c in claims:
        cells = (c.report, c.claim, f"**{c.verdict}**", c.evidence, c.rule)
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
