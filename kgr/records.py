"""Record kinds: the contract between pipeline stages (DESIGN.md section 2).

A record is a plain dict with a ``kind``. Stages consume the kinds they handle and
pass every other record through unchanged and in order (see ``passthrough``).
Field names are public interface: they are documented in man/kgr.1.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterable, Iterator

from .errors import BadPath, BadRecord

DOC = "doc"
CHUNK = "chunk"
MENTION = "mention"
ENTITY = "entity"
RELATION = "relation"
ERROR = "error"

KINDS = (DOC, CHUNK, MENTION, ENTITY, RELATION, ERROR)

# Fields a record of each kind must carry for a stage to accept it.
REQUIRED: dict[str, tuple[str, ...]] = {
    DOC: ("path", "text", "hash"),
    CHUNK: ("doc", "ord", "text"),
    MENTION: ("chunk", "surface", "type"),
    ENTITY: ("key", "name", "type"),
    RELATION: ("src", "dst", "rel"),
    ERROR: ("stage", "message"),
}


def text_hash(text: str) -> str:
    """The content hash used everywhere: sha256 of the UTF-8 text, hex."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def bytes_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chunk_id(doc_path: str, ord_: int) -> str:
    """The stable id of a chunk across stages: ``<doc path>#<ord>``."""
    return f"{doc_path}#{ord_}"


def check(record: Any, line: int | None = None) -> dict:
    """Validate the shape of one record; raise BadRecord naming the first problem."""
    if not isinstance(record, dict):
        raise BadRecord(line, f"expected a JSON object, got {type(record).__name__}")
    kind = record.get("kind")
    if kind is None:
        raise BadRecord(line, 'record has no "kind" field')
    if not isinstance(kind, str):
        raise BadRecord(line, '"kind" must be a string')
    for field in REQUIRED.get(kind, ()):
        if field not in record:
            raise BadRecord(line, f'{kind} record has no "{field}" field')
    if kind == DOC:
        why = doc_path_problem(record["path"])
        if why is not None:
            raise BadPath(line, bad_path_message(record["path"], why))
    return record


def doc_path_problem(path: Any) -> str | None:
    """Why ``path`` cannot be a doc record's path, or None when it can.

    A doc path names a file relative to the knowledge root: it passes the check every
    path a tool receives passes (kgr.confine: no NUL, not absolute, no '..'), and it is
    in the form discovery gives (no empty or '.' component), so that ``kgr verify``
    and pruning can find its file, and remove the document when the file is gone.
    """
    from .confine import problem

    why = problem(path)
    if why is not None:
        return why
    if not path.strip():
        return "is empty"
    if any(part in ("", ".") for part in path.split("/")):
        return "is not in normal form (an empty or '.' component)"
    return None


def bad_path_message(path: Any, why: str) -> str:
    shown = path if not isinstance(path, str) or len(path) <= 120 else path[:120] + "..."
    return f'doc record\'s "path" {shown!r} {why}'


def error(stage: str, message: str, **fields: Any) -> dict:
    """An error record: bad input becomes one of these, never a crash of the run."""
    rec = {"kind": ERROR, "stage": stage, "message": message}
    rec.update({k: v for k, v in fields.items() if v is not None})
    return rec


def passthrough(
    records: Iterable[dict],
    kinds: str | tuple[str, ...],
    handle: Callable[[dict], Iterable[dict]],
) -> Iterator[dict]:
    """Apply ``handle`` to records of ``kinds``; yield all others unchanged, in order."""
    if isinstance(kinds, str):
        kinds = (kinds,)
    for rec in records:
        if rec.get("kind") in kinds:
            yield from handle(rec)
        else:
            yield rec
