"""The knowledge root a database holds: paths in it are relative to that root."""

from __future__ import annotations

import os
from pathlib import Path

from kgr.config import Settings
from kgr.errors import UsageError
from kgr.store.db import Store


def check_root(store: Store, root: Path) -> None:
    """A database holds one knowledge root: paths in it are relative to that root.

    The root is recorded relative to the database's folder, so a knowledge directory
    moved together with its database (a copy of a project, a clone) still matches.
    """
    db_dir = store.path.resolve().parent
    stored = stored_root(store)
    rel = os.path.relpath(root, db_dir)
    if stored is None:
        with store.write():
            store.set_meta("root", rel)
    elif stored != root and store.scalar("SELECT count(*) FROM docs WHERE source='file'"):
        raise UsageError(
            f"{store.path} holds documents from {stored}, not {root}",
            hint=f"pass --root {stored}, or use another --db",
        )
    elif stored != root:
        with store.write():
            store.set_meta("root", rel)


# The project id of a configuration that names none.
DEFAULT_PROJECT = Settings().project


def check_project(store: Store, project: str | None) -> None:
    """Seed 000 section 16's project id: one database holds one project, its id stamped in the
    meta table (``project``) by the first writer that names one. A database stamped with another
    project that holds documents is refused; the default id (no project configured) writes into
    any database and never replaces a stamp."""
    if not project:
        return
    stored = store.get_meta("project")
    if stored == project or (stored is not None and project == DEFAULT_PROJECT):
        return
    if stored not in (None, DEFAULT_PROJECT) and store.scalar("SELECT count(*) FROM docs WHERE source='file'"):
        raise UsageError(
            f"{store.path} holds the documents of project {stored!r}, not {project!r}",
            hint=f"set project: {stored} in the config (or KGR_PROJECT={stored}), or use another --db",
        )
    with store.write(timed=False):
        store.set_meta("project", project)


def stored_root(store: Store) -> Path | None:
    """The knowledge root recorded in the database, as an absolute path."""
    value = store.get_meta("root")
    if value is None:
        return None
    return (store.path.resolve().parent / value).resolve()
