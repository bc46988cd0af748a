"""What a reader set aside while reading a trace, as one line each (pure: the analyses and the CLI both print it)."""

from __future__ import annotations

from stepscope.model.events import TraceMeta

MAX_NAME_CHARS = 65_536
"""Event names and categories longer than this (in characters) are cut to it and counted
(``TraceMeta.cut_strings``): no kernel name is that long, and a hostile one is not kept whole in the table."""


def reading_notes(meta: TraceMeta) -> list[str]:
    """One line per way the reader had to set a value aside (none for a clean trace)."""
    out = []
    if meta.wrong_type_values:
        out.append(f"{meta.wrong_type_values} values of the wrong type (an array or object where a number belongs) "
                   "were read as not measured")
    if meta.cut_strings:
        out.append(f"{meta.cut_strings} event names or categories longer than {MAX_NAME_CHARS:,} characters were "
                   "cut to that length")
    return out
