"""Table exports of a run: every table a report shows, in CSV, JSON or Parquet; column names are
stable and listed in docs/reference.md. Formats are found through ``WRITERS`` (name -> writer)."""

from __future__ import annotations

from stepscope.report.export.tables import run_tables
from stepscope.report.export.writers import WRITERS, write_tables

__all__ = ["WRITERS", "run_tables", "write_tables"]
