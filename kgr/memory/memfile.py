"""The memory server's JSONL file, imported when a memory server starts (seed 001's
``KNOWLEDGE_BASE_FILE_PATH``, the reference server's ``MEMORY_FILE_PATH``).

Both servers keep their whole graph in one JSONL file named by an environment variable. kgr
keeps it in the database; so that a client configured for either server (the variable set
in its MCP config) finds its memory, the file is imported once, by :func:`import_at_start`,
when the database holds no memory entity yet. A database that already holds some is never
re-imported (what was stored since stays as it is; ``kgr import --format mcp-memory`` merges a
file by hand). The file itself is only read.

The file is imported with :func:`kgr.memory.graph.import_jsonl`, in one transaction. One
difference with ``kgr import``: a relation whose end is not an entity of the file (the
reference stores such a relation dangling; seed 001's own example has one) is left out and
reported, instead of refusing the whole file, since kgr's graph cannot hold a relation to
nothing. A line that is not a valid record refuses the whole file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import orjson

from kgr.errors import BadRecord, UsageError
from kgr.memory import graph as memory
from kgr.store import Store

# In the order they win when both are set: seed 001's own name first.
VARIABLES = ("KNOWLEDGE_BASE_FILE_PATH", "MEMORY_FILE_PATH")


@dataclass
class MemoryFile:
    """The file a memory server was told to import: by which variable, and what it ignored."""

    variable: str
    path: Path
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (variable, value) set but not used


def from_environment(environ: Mapping[str, str] | None = None) -> MemoryFile | None:
    """The memory file named by the environment (a relative path is relative to the working
    directory), or None when neither variable is set (or set empty)."""
    env = os.environ if environ is None else environ
    found = [(name, env[name]) for name in VARIABLES if env.get(name, "").strip()]
    if not found:
        return None
    (name, value), rest = found[0], found[1:]
    return MemoryFile(name, Path(value).expanduser(), ignored=[(n, v) for n, v in rest])


def count_entities(store: Store) -> int:
    """How many memory entities (the memory tools' graph) the database holds."""
    return store.scalar("SELECT count(*) FROM entities WHERE key >= 'memory:' AND key < 'memory;'")


def read_records(path: Path, variable: str = "the memory file") -> tuple[list[dict], list[dict], list[dict]]:
    """(entities, relations kept, relations left out) of the file, checked; a clear KgrError
    (naming the variable, the file and the line) when it cannot be read or is not a memory file."""
    try:
        with open(path, "rb") as f:
            entities, relations, _ = memory.parse_jsonl(f)
    except BadRecord as exc:
        raise BadRecord(
            None,
            f"{variable}={path} is not a memory file: line {exc.line}: {exc.reason}",
            hint=f"fix that line, or unset {variable}; the server did not start, so nothing was written "
            "over a memory that could not be read",
        ) from None
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{variable}={path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
            hint=f"point {variable} at the server's JSONL memory file",
        ) from None
    except OSError as exc:
        raise UsageError(
            f"{variable}={path} cannot be read: {exc.strerror or exc}",
            hint=f"point {variable} at the server's JSONL memory file, or unset it",
        ) from None
    names = {e["name"] for e in entities}
    kept = [r for r in relations if r["from"] in names and r["to"] in names]
    left = [r for r in relations if not (r["from"] in names and r["to"] in names)]
    return entities, kept, left


@dataclass
class Outcome:
    """What :func:`import_at_start` did."""

    imported: dict[str, int] | None = None  # import_jsonl's counts, when the file was imported
    existing: int = 0  # memory entities the database held (then nothing was imported)
    missing: bool = False  # the file does not exist (a first run: the graph starts empty)
    left_out: list[dict] = field(default_factory=list)  # relations to an entity the file lacks


def import_at_start(store: Store, path: Path, variable: str = "the memory file") -> Outcome:
    """Import the memory file at ``path`` into ``store`` (open for writing, under the writer
    lock) when the database holds no memory entity; otherwise leave both as they are.

    A missing file is a first run (the seed and the reference both start with an empty
    graph); an unreadable or invalid one raises, changing nothing."""
    existing = count_entities(store)
    if existing:
        return Outcome(existing=existing)
    if not path.exists():
        return Outcome(missing=True)
    entities, kept, left = read_records(path, variable)
    lines = [orjson.dumps({"type": "entity", **e}) for e in entities]
    lines += [orjson.dumps({"type": "relation", **r}) for r in kept]
    return Outcome(imported=memory.import_jsonl(store, lines), left_out=left)
