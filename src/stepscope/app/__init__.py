"""The application layer: what every command, page and integration reads a run through.

It sits above analyze/ (pure analyses) and traces/ / store/ (file reading) and below cli/, report/ callers
and integrations/. ``RunAnalysis`` loads a run once and holds, lazily and cached, every analysis of it."""

from __future__ import annotations

from stepscope.app.runanalysis import RunAnalysis

__all__ = ["RunAnalysis"]
