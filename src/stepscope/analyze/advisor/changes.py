"""Suggestions as changes stepscope can apply without editing the user's code: :class:`Change` and
:func:`apply_changes` (defined in ``stepscope.model.changes``, a record every layer may import; its JSON and
command-line editing are no analysis)."""

from __future__ import annotations

from stepscope.model.changes import (
           ENV_KEYS,
           LOADER_KEYS,
           NEEDS_CODE_CHANGE,
           OVERRIDES_ENV,
           THREAD_KEYS,
           Change,
           ChangeKind,
           apply_changes,
           apply_param,
           change_problem,
)

__all__ = ["ENV_KEYS", "LOADER_KEYS", "NEEDS_CODE_CHANGE", "OVERRIDES_ENV", "THREAD_KEYS", "Change", "ChangeKind",
           "apply_changes", "apply_param", "change_problem"]
