"""Reproductions of the reports bojax is built from, one module per report.

Each module holds the report's settings (``config``), a ``run`` that performs the
experiment and writes its figures and ``summary.json``, and the plotting. The scripts
in ``experiments/`` are thin command lines over these; ``bojax demo`` runs one too.
"""
