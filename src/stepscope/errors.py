"""The few errors stepscope raises.

A :class:`UserError` is a mistake the user can fix (a bad argument, an unknown run, an unreadable
file): the CLI prints its one-line message and exits with its code, never a traceback.
"""

from __future__ import annotations


class StepscopeError(Exception):
    """Base of every error stepscope raises on purpose."""

    exit_code: int = 1


class UserError(StepscopeError):
    """A user mistake: one line that says what is wrong and what to do."""

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NotFoundError(UserError):
    """A run, file or name that does not exist."""


class StoreFormatError(UserError):
    """A stored file of an unknown or newer format version, or one that does not parse."""


class TraceError(UserError):
    """A trace file that cannot be read as a Kineto / Chrome trace."""
