"""Reading and writing records as JSON Lines, with line numbers for errors."""

from __future__ import annotations

import sys
from typing import IO, Iterable, Iterator

import orjson

from kgr import records
from kgr.errors import BadRecord

MAX_LINE_BYTES = 256 * 1024 * 1024


def read(stream: IO[bytes], *, stage: str = "input", strict: bool = False) -> Iterator[dict]:
    """Yield records from a binary JSON Lines stream.

    A line that is not a valid record becomes an ``error`` record (with its line
    number) so that the pipeline goes on; with ``strict`` it raises BadRecord.
    Blank lines are skipped.
    """
    for lineno, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        try:
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise BadRecord(lineno, f"not valid JSON ({exc.args[0].split(':')[0]})") from None
            yield records.check(obj, lineno)
        except BadRecord as exc:
            if strict:
                raise
            yield records.error(stage, str(exc), line=lineno, reason=getattr(exc, "code", None))


def dumps(record: dict) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def write(recs: Iterable[dict], stream: IO[bytes] | None = None, *, flush_each: bool = False) -> int:
    """Write records as JSON Lines; return how many were written."""
    out = stream if stream is not None else sys.stdout.buffer
    n = 0
    for rec in recs:
        out.write(dumps(rec))
        n += 1
        if flush_each:
            out.flush()
    out.flush()
    return n
