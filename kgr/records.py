"""Record kinds: the contract between pipeline stages (DESIGN.md section 2).

A record is a plain dict with a ``kind``. Stages consume the kinds they handle and
pass every other record through unchanged and in order (see ``passthrough``).
Field names are public interface: they are documented in man/kgr.1.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterable, Iterator

from kgr.errors import BadPath, BadRecord

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


_NONE = type(None)
_STR, _INT, _NUM, _DICT, _LIST = (str,), (int,), (int, float), (dict,), (list,)
_OPT_STR, _OPT_INT, _OPT_NUM, _OPT_DICT = (str, _NONE), (int, _NONE), (int, float, _NONE), (dict, _NONE)
_VECTOR = {"embedding": _OPT_STR, "model": _OPT_STR, "dim": _OPT_INT}

# The type of each field a stage reads, checked when a record is read, so that a field of
# the wrong type is a BadRecord naming it rather than a TypeError three stages later.
# Lists of strings are checked item by item; fields not listed are free.
FIELD_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    DOC: {
        "path": _STR,
        "text": _STR,
        "hash": _STR,
        "title": _OPT_STR,
        "format": _OPT_STR,
        "source": _OPT_STR,
        "lang": _OPT_STR,
        "file_hash": _OPT_STR,
        "mtime_ms": _OPT_INT,
        "size": _OPT_INT,
        "meta": _OPT_DICT,
    },
    CHUNK: {
        "doc": _STR,
        "ord": _INT,
        "text": _STR,
        "prelude": _OPT_STR,
        "section": _OPT_STR,
        "headings": (list, _NONE),
        "start": _OPT_INT,
        "end": _OPT_INT,
        "tokens": _OPT_INT,
        "hash": _OPT_STR,
        "chunk_kind": _OPT_STR,
        **_VECTOR,
    },
    MENTION: {
        "chunk": _STR,
        "surface": _STR,
        "type": _STR,
        "start": _OPT_INT,
        "end": _OPT_INT,
        "score": _OPT_NUM,
        "source": _OPT_STR,
        "features": _OPT_DICT,
        "entity": _OPT_STR,
        "link_score": _OPT_NUM,
        "refers_to": _OPT_STR,
    },
    ENTITY: {
        "key": _STR,
        "name": _STR,
        "type": _STR,
        "norm": _OPT_STR,
        "aliases": (list, _NONE),
        "description": _OPT_STR,
        "popularity": _OPT_NUM,
        **_VECTOR,
    },
    RELATION: {
        "src": _STR,
        "dst": _STR,
        "rel": _STR,
        "confidence": _OPT_NUM,
        "pattern": _OPT_STR,
        "src_type": _OPT_STR,
        "dst_type": _OPT_STR,
        "evidence": _OPT_DICT,
        "src_surface": _OPT_STR,
        "dst_surface": _OPT_STR,
    },
    ERROR: {"stage": _STR, "message": _STR, "path": _OPT_STR, "reason": _OPT_STR, "line": _OPT_INT, "size": _OPT_INT},
}
_STR_LISTS = {"headings", "aliases"}
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", dict: "an object", list: "a list", _NONE: "null"}


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
    for field, types in FIELD_TYPES.get(kind, {}).items():
        if field not in record:
            continue
        value = record[field]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if ok and field in _STR_LISTS and isinstance(value, list):
            ok = all(isinstance(v, str) for v in value)
        if not ok:
            want = " or ".join(dict.fromkeys(_TYPE_NAMES[t] for t in types))
            what = f"a list of strings{' or null' if _NONE in types else ''}" if field in _STR_LISTS else want
            raise BadRecord(line, f'{kind} record: "{field}" must be {what}, not {type(value).__name__}')
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
    from kgr.confine import problem

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
