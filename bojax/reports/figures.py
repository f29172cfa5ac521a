"""Figure code the reports and benchmarks share. Nothing here can change a result, so
:func:`bojax.reports.provenance.code_fingerprint` leaves modules named ``figures`` out."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (imported late: it is slow)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: Path, dpi: int = 120, **options) -> Path:
    """Lay ``fig`` out, write it to ``path`` and close it; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, **options)
    pyplot().close(fig)
    return path


def quartile_band(
    ax, curves: np.ndarray, colour: str, label: str | None, alpha: float = 0.15, **line
) -> None:
    """The median over runs (rows of ``curves``) at each step, with the quartiles shaded;
    steps count from 1."""
    q25, q50, q75 = np.percentile(curves, [25, 50, 75], axis=0)
    steps = np.arange(1, curves.shape[1] + 1)
    ax.plot(steps, q50, color=colour, label=label, **line)
    ax.fill_between(steps, q25, q75, color=colour, alpha=alpha, lw=0)
