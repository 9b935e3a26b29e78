"""RELIABILITY.md P2, the flate bombs: one FlateDecode stream of 2 MB that inflates to 2 GiB,
and the same behind two nested FlateDecode filters (a 3 KB file). Pass: the file ends as a
classified failure (``too_large``) in <= 90 s, the parser child stays under 1 GiB."""

from __future__ import annotations

import subprocess
import sys
import time
import zlib

import orjson
import pytest
from fuzzing import pdf_from_objects

from kgr.errors import ParseFailure
from kgr.stages.parsers import Limits, _inflate, parse_pdf

GIB = 1 << 30


def zeros_deflate(size: int, chunk: int = 1 << 24) -> bytes:
    """A zlib stream of ``size`` zero bytes, built without compressing them all: one 16 MiB
    block ending on a full flush (byte-aligned, no back-references across it) repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = c.compress(b"\0" * chunk) + c.flush(zlib.Z_FULL_FLUSH)
    tail = c.flush(zlib.Z_FINISH)
    adler = ((size % 65521) << 16) | 1  # Adler-32 of n zero bytes: a = 1, b = n mod 65521
    return b"\x78\xda" + body * (size // chunk) + tail + adler.to_bytes(4, "big")


def pdf_with_stream(data: bytes, filters: str) -> bytes:
    """A one-page PDF whose content stream is ``data`` with ``filters`` (a correct xref)."""
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter %s >>\nstream\n" % (len(data), filters.encode()) + data + b"\nendstream",
    ]
    return pdf_from_objects(objs)


def test_zeros_deflate_is_a_real_zlib_stream_of_that_size():
    z = zeros_deflate(1 << 26)
    assert zlib.decompress(z) == b"\0" * (1 << 26)


def test_p2_flate_bombs_are_classified_too_large_within_bounds(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    bomb = zeros_deflate(2 * GIB)
    (root / "flate-bomb.pdf").write_bytes(pdf_with_stream(bomb, "/FlateDecode"))
    (root / "nested-bomb.pdf").write_bytes(pdf_with_stream(zlib.compress(bomb, 9), "[/FlateDecode /FlateDecode]"))
    text = b"BT /F1 12 Tf 72 720 Td (Small and fine) Tj ET"
    (root / "fine.pdf").write_bytes(pdf_with_stream(zlib.compress(text), "/FlateDecode"))
    assert (root / "nested-bomb.pdf").stat().st_size < 10_000
    # normalize runs in a fresh interpreter, so the peak of its children is the parser's alone
    # (this test process has reaped other tests' children, model loads among them)
    script = (
        "import orjson, resource, sys, time\n"
        "from kgr.stages.normalize import NormalizeOptions, normalize\n"
        "root = sys.argv[1]\n"
        "started = time.monotonic()\n"
        "options = NormalizeOptions(redact_key=b'k', workers=1)  # P2's bounds: 1 GiB, 60 s CPU, 90 s wall\n"
        "out = {r['path']: {'kind': r['kind'], 'reason': r.get('reason')}\n"
        "       for r in normalize([root], root=root, options=options)}\n"
        "elapsed = time.monotonic() - started\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "sys.stdout.buffer.write(orjson.dumps({'out': out, 'elapsed': elapsed, 'peak': peak}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    res = orjson.loads(proc.stdout)
    out = res["out"]
    assert res["elapsed"] < 90
    for name in ("flate-bomb.pdf", "nested-bomb.pdf"):
        assert out[name]["kind"] == "error" and out[name]["reason"] == "too_large", out[name]
    assert out["fine.pdf"]["kind"] == "doc"
    # every child of that process has been reaped (the pool is closed): its peak is counted
    assert 0 < res["peak"] <= GIB


def test_inflate_caps_output_keeps_ordinary_streams_and_is_lenient_in_linear_time(tmp_path):
    small = Limits(max_stream_bytes=4 << 20)
    data = b"ordinary content " * 1000
    assert _inflate(zlib.compress(data), small) == data
    with pytest.raises(ParseFailure) as caught:
        _inflate(zeros_deflate(64 << 20), small)
    assert caught.value.reason == "too_large"
    with pytest.raises(zlib.error):  # truncated: pdfminer then falls back to the lenient path
        _inflate(zlib.compress(data)[:-40], small)
    # the lenient path (bad checksum) keeps what inflated, fast: pdfminer's own is quadratic
    corrupt = bytearray(zlib.compress(bytes(range(256)) * 4000, 1))
    corrupt[-1] ^= 0xFF
    started = time.perf_counter()
    assert _inflate(bytes(corrupt), small, lenient=True) == bytes(range(256)) * 4000
    assert time.perf_counter() - started < 10
    with pytest.raises(ParseFailure):
        _inflate(zeros_deflate(64 << 20)[:-4] + b"\0\0\0\0", small, lenient=True)


def test_a_bomb_parsed_in_process_stops_at_the_cap(tmp_path, monkeypatch):
    import pdfminer.pdftypes as pdftypes

    for name in ("zlib", "decompress_corrupted"):  # parse_pdf bounds pdfminer; undo it after the test
        monkeypatch.setattr(pdftypes, name, getattr(pdftypes, name))
    path = tmp_path / "b.pdf"
    path.write_bytes(pdf_with_stream(zlib.compress(zeros_deflate(256 << 20), 9), "[/FlateDecode /FlateDecode]"))
    with pytest.raises(ParseFailure) as caught:
        parse_pdf(str(path), Limits(max_stream_bytes=8 << 20))
    assert caught.value.reason == "too_large"
