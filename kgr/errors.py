"""Exit statuses and the error hierarchy.

Library code raises these. On the command line, the one error boundary
(:class:`kgr.cli.KgrGroup`, around every command) turns each into one line on stderr and the
matching exit status; under ``kgr serve``, :func:`kgr.mcp.registry.boundary` turns each into
one tool error.
"""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    OK = 0
    ERROR = 1  # bad input or runtime error
    USAGE = 2  # bad command line
    INTERRUPTED = 130  # SIGINT


class KgrError(Exception):
    """Base of every error kgr reports to a user. ``hint`` says how to fix it."""

    exit_status = ExitStatus.ERROR

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(KgrError):
    exit_status = ExitStatus.USAGE


class EntityNotFound(UsageError):
    """A command or tool named an entity the knowledge graph (or the memory graph) does not hold.

    A usage error to the library, but the CLI exits 1 for it, as for any input naming what is
    not there (`kgr explain nothing` exits 1). ``name`` is the name asked for, when there is one.
    """

    exit_status = ExitStatus.ERROR

    def __init__(self, message: str, *, name: str | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.name = name


class BadRecord(KgrError):
    """A JSON Lines input line that is not a valid record."""

    def __init__(self, line: int | None, reason: str, *, hint: str | None = None):
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{reason}", hint=hint)
        self.line = line
        self.reason = reason


class BadPath(BadRecord):
    """A record whose path could not name a file under the knowledge root."""

    code = "bad_path"


class ConfigError(KgrError):
    pass


class StoreError(KgrError):
    pass


class SchemaTooNew(StoreError):
    pass


class ModelMismatch(StoreError):
    pass


class NotKgrDatabase(StoreError):
    """A --db file that is not kgr's: another application's SQLite database, or not SQLite at all."""


class EmptyDatabase(StoreError):
    """A read of a database file that is empty (0 bytes, or SQLite with no tables yet)."""


class ReadOnlyDatabase(StoreError):
    """A write to a database file (or folder) that cannot be written."""


class DatabaseLocked(StoreError):
    """Another connection held the database's write lock for longer than the busy timeout."""


class OutsideRoot(KgrError):
    """A path that resolves outside the knowledge root."""


class ParseFailure(KgrError):
    """A file that could not be turned into a document; ``reason`` is a short class."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
