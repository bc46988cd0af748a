"""The notebook API: a stored run or a set of traces, loaded once, every table a report shows as a pandas
DataFrame, and inline HTML overviews in Jupyter (docs/api.md).

It sits at the top with cli/ and integrations/: it reads runs through the application layer (app/),
renders with report/ and reads traces with traces/; nothing but ``stepscope.load`` / ``stepscope.load_traces``
imports it. pandas is needed only when a DataFrame is asked for (``pip install 'stepscope[pandas]'``).
"""

from __future__ import annotations

from stepscope.notebook.diff import DiffView
from stepscope.notebook.run import NotebookRun, load
from stepscope.notebook.traceset import TraceSet, load_traces

__all__ = ["DiffView", "NotebookRun", "TraceSet", "load", "load_traces"]
