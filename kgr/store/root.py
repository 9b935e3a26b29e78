"""The knowledge root a database holds: paths in it are relative to that root."""

from __future__ import annotations

import os
from pathlib import Path

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


def stored_root(store: Store) -> Path | None:
    """The knowledge root recorded in the database, as an absolute path."""
    value = store.get_meta("root")
    if value is None:
        return None
    return (store.path.resolve().parent / value).resolve()
