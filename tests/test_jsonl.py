import io

import pytest

from kgr import jsonl, records
from kgr.errors import BadRecord


def test_round_trip_keeps_order_and_unicode():
    recs = [{"kind": "doc", "path": "a.md", "text": "héllo ✓", "hash": "x"}, {"kind": "other", "n": 1}]
    buf = io.BytesIO()
    assert jsonl.write(recs, buf) == 2
    buf.seek(0)
    assert list(jsonl.read(buf)) == recs


def test_bad_lines_become_error_records_with_line_numbers():
    data = b'{"kind": "x"}\n\nnot json\n[1]\n{"no": "kind"}\n{"kind": "doc", "path": "a"}\n'
    out = list(jsonl.read(io.BytesIO(data)))
    assert out[0] == {"kind": "x"}
    errors = out[1:]
    assert [e["kind"] for e in errors] == ["error"] * 4
    assert [e["line"] for e in errors] == [3, 4, 5, 6]
    assert "not valid JSON" in errors[0]["message"]
    assert "expected a JSON object" in errors[1]["message"]
    assert 'no "kind"' in errors[2]["message"]
    assert 'doc record has no "text" field' in errors[3]["message"]


def test_strict_mode_raises():
    with pytest.raises(BadRecord, match="line 1: not valid JSON"):
        list(jsonl.read(io.BytesIO(b"{oops\n"), strict=True))


def test_passthrough_keeps_unhandled_kinds_in_order():
    recs = [{"kind": "a", "i": 0}, {"kind": "b", "i": 1}, {"kind": "a", "i": 2}]
    out = list(records.passthrough(recs, "b", lambda r: [r, {"kind": "c"}]))
    assert out == [recs[0], recs[1], {"kind": "c"}, recs[2]]


def test_chunk_id_and_hashes_are_stable():
    assert records.chunk_id("dir/a.md", 3) == "dir/a.md#3"
    assert records.text_hash("abc") == records.bytes_hash(b"abc")
    assert len(records.text_hash("")) == 64
