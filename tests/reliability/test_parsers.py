"""RELIABILITY.md P1-P6 and P8: hostile files cost one classified error record, never the run."""

from __future__ import annotations

import io
import os
import resource
import time
import unicodedata
import zipfile
from pathlib import Path

import pytest

from kgr.stages.normalize import NormalizeOptions, normalize

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def _stubs_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


def run(root: Path, **opts) -> dict[str, dict]:
    options = NormalizeOptions(redact_key=b"k", **opts)
    out = {}
    for rec in normalize([str(root)], root=str(root), options=options):
        out[rec.get("path") or rec["message"]] = rec
    return out


# -- P1 isolation -----------------------------------------------------------------------


def test_p1_parser_that_explodes_hangs_recurses_or_crashes_costs_one_record(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(16):
        (root / f"ok{i:02}.html").write_text(f"fine{i}")
    for kind in ("alloc", "loop", "recurse", "segv"):
        (root / f"bad-{kind}.html").write_text(kind)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    out = run(root, parsers={"html": "stubs:parse"}, parse_timeout_s=4, parse_memory_mb=512, workers=2)
    assert time.monotonic() - started < 60
    reasons = {k: r.get("reason") for k, r in out.items() if r["kind"] == "error"}
    assert reasons == {
        "bad-alloc.html": "memory",
        "bad-loop.html": "timeout",
        "bad-recurse.html": "recursion",
        "bad-segv.html": "crash",
    }
    assert sum(1 for r in out.values() if r["kind"] == "doc") == 16
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 50 * 1024


def test_p1_failed_files_are_not_parsed_again_until_they_change(tmp_path, monkeypatch):
    from kgr import config
    from kgr.ingest.pipeline import ingest
    from kgr.stages import normalize as norm
    from kgr.store import Store

    root = tmp_path / "kb"
    root.mkdir()
    (root / "bad.html").write_text("recurse")
    (root / "good.html").write_text("fine")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("KGR_STUB_LOG", str(log))
    original = norm.NormalizeOptions.from_config
    monkeypatch.setattr(
        norm.NormalizeOptions,
        "from_config",
        classmethod(
            lambda cls, cfg: norm.NormalizeOptions(**{**original(cfg).__dict__, "parsers": {"html": "stubs:parse"}})
        ),
    )
    with Store(tmp_path / "kb.sqlite") as s:
        first = ingest([str(root)], s, config=config.load(None), graph=False)
        second = ingest([str(root)], s, config=config.load(None), graph=False)
        assert first.failed == 1 and second.unchanged == 2
        assert s.query("SELECT path, status FROM docs ORDER BY path") == [("bad.html", "failed"), ("good.html", "ok")]
    assert log.read_text().splitlines().count("bad.html") == 1


# -- P2 PDFs ------------------------------------------------------------------------------


def _pdf(path: Path, pages: int = 1, encrypt: str | None = None) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4, encrypt=encrypt)
    for i in range(pages):
        c.drawString(72, 720, f"Page body {i}")
        c.showPage()
    c.save()


def test_p2_malformed_and_malicious_pdfs_end_quickly_and_classified(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    _pdf(root / "good.pdf")
    data = (root / "good.pdf").read_bytes()
    (root / "truncated.pdf").write_bytes(data[: len(data) // 3])
    (root / "junk.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(5000))
    _pdf(root / "encrypted.pdf", encrypt="secret-password")
    _pdf(root / "many.pdf", pages=60)
    (root / "nopdf.pdf").write_bytes(b"hello, not a pdf")
    started = time.monotonic()
    out = run(root, max_pages=50, parse_timeout_s=30)
    assert time.monotonic() - started < 90
    assert out["good.pdf"]["kind"] == "doc" and "Page body 0" in out["good.pdf"]["text"]
    assert out["encrypted.pdf"]["reason"] == "encrypted"
    assert out["many.pdf"]["reason"] == "too_many_pages"
    assert out["nopdf.pdf"]["reason"] == "malformed"
    for name in ("truncated.pdf", "junk.pdf"):
        assert out[name]["kind"] == "doc" or out[name]["reason"] in ("malformed", "encrypted", "timeout")


def test_p2_installed_pdfminer_has_no_pickled_cmaps():
    import pdfminer

    assert not list(Path(pdfminer.__file__).parent.rglob("*.pickle.gz"))


# -- P3 DOCX / zip ---------------------------------------------------------------------------


def _docx(path: Path, text: str = "Hello from a document") -> None:
    import docx

    d = docx.Document()
    d.add_heading("Title here", level=1)
    d.add_paragraph(text)
    d.save(str(path))


def _rewrite_member(src: Path, dst: Path, name: str, data: bytes) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item, data if item.filename == name else zin.read(item.filename))


def test_p3_docx_bombs_dtds_encryption_and_directories(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    _docx(root / "good.docx")
    base = root / "good.docx"
    with zipfile.ZipFile(root / "bomb.docx", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", b"\0" * (200 * 1024 * 1024))
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol2;</w:t></w:r></w:p></w:body></w:document>'
    )
    _rewrite_member(base, root / "laughs.docx", "word/document.xml", laughs)
    xxe = laughs.replace(b'<!ENTITY lol "lol">', b'<!ENTITY lol SYSTEM "file:///etc/passwd">')
    _rewrite_member(base, root / "xxe.docx", "word/document.xml", xxe)
    (root / "encrypted.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512)
    with zipfile.ZipFile(root / "members.docx", "w") as z:
        for i in range(12000):
            z.writestr(f"x/{i}.xml", "<a/>")
    (root / "evil.docx").mkdir()
    started = time.monotonic()
    out = run(root, parse_timeout_s=30)
    assert time.monotonic() - started < 60
    assert out["good.docx"]["kind"] == "doc" and "Hello from a document" in out["good.docx"]["text"]
    assert out["bomb.docx"]["reason"] == "zip_bomb"
    assert out["laughs.docx"]["reason"] == "dtd"
    assert out["xxe.docx"]["reason"] == "dtd"
    assert out["encrypted.docx"]["reason"] == "encrypted"
    assert out["members.docx"]["reason"] == "zip_bomb"
    assert "evil.docx" not in out  # a directory is never handed to a parser
    passwd = Path("/etc/passwd").read_text().splitlines()[0]
    assert all(passwd not in (r.get("text") or "") for r in out.values())


# -- P4 HTML ------------------------------------------------------------------------------------


def test_p4_html_boilerplate_and_hidden_text_never_reach_the_document(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "page.html").write_text(
        "<html><head><title>T</title><style>.c{}/*CANARY-STYLE*/</style><script>var x='CANARY-SCRIPT'</script></head><body>"
        "<nav>CANARY-NAV</nav><header>CANARY-HEADER</header><main><h1>Visible title</h1><p>Visible text.</p>"
        "<template>CANARY-TEMPLATE</template><noscript>CANARY-NOSCRIPT</noscript><!-- CANARY-COMMENT -->"
        "<div hidden>CANARY-HIDDEN</div><span style='display: none'>CANARY-DISPLAY</span><p aria-hidden='true'>CANARY-ARIA</p>"
        "<ul><li>item one</li></ul><table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
        "<pre><code>code block</code></pre></main><footer>CANARY-FOOTER</footer></body></html>"
    )
    (root / "deep.html").write_text("<div>" * 100_000 + "deep text" + "</div>" * 100_000)
    (root / "long.html").write_text("<p>" + "x" * (5 * 1024 * 1024) + "</p>")
    out = run(root, parse_timeout_s=20)
    text = out["page.html"]["text"]
    assert "CANARY" not in text
    assert "Visible text." in text and "# Visible title" in text and "item one" in text
    assert "| a | b |" in text and "| 1 | 2 |" in text and "code block" in text
    for name in ("deep.html", "long.html"):
        assert out[name]["kind"] == "doc" or out[name]["reason"] in ("recursion", "timeout", "memory")


# -- P5 text and Markdown ----------------------------------------------------------------------------


def test_p5_binaries_encodings_and_giant_lines(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "png.md").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(100))
    (root / "elf.md").write_bytes(b"\x7fELF" + os.urandom(100))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a", "b")
    (root / "zip.md").write_bytes(buf.getvalue())
    (root / "db.md").write_bytes(b"SQLite format 3\x00" + b"\0" * 100)
    (root / "bad-utf8.md").write_bytes(b"# Caf\xe9\n\nok \xff\xfe text\n")
    (root / "utf16.txt").write_bytes("\ufeffHello UTF-16 wörld\n".encode("utf-16-le"))
    (root / "cr.txt").write_bytes(b"line one\rline two\r\n")
    (root / "empty-lines.md").write_text("\n" * 1_000_000 + "end\n")
    (root / "long-line.md").write_text("y" * (10 * 1024 * 1024))
    started = time.monotonic()
    out = run(root)
    assert time.monotonic() - started < 60
    for name in ("png.md", "elf.md", "zip.md", "db.md"):
        assert out[name]["reason"] == "binary", name
    assert "\ufffd" in out["bad-utf8.md"]["text"]
    assert out["utf16.txt"]["text"].startswith("Hello UTF-16 wörld")
    assert out["cr.txt"]["text"] == "line one\nline two\n"
    assert out["empty-lines.md"]["kind"] == "doc"
    assert all("\x00" not in (r.get("text") or "") for r in out.values())


def test_p5_text_decoding_time_is_linear(tmp_path):
    from kgr.stages.parsers import parse_text

    def timed(n):
        data = ("word " * n + "\n").encode()
        t = time.perf_counter()
        parse_text(data, "md")
        return time.perf_counter() - t

    small, big = min(timed(500_000) for _ in range(3)), min(timed(1_000_000) for _ in range(3))
    assert big <= 2.5 * small + 0.05


# -- P6 limits before reading ----------------------------------------------------------------------


def test_p6_oversize_files_are_skipped_from_stat_alone(tmp_path, monkeypatch):
    import builtins

    root = tmp_path / "kb"
    root.mkdir()
    big = root / "big.md"
    big.write_text("z" * 5000)
    (root / "small.md").write_text("# Small\n")
    real_open = builtins.open

    def guarded(file, *args, **kwargs):
        if str(file) == str(big):
            raise AssertionError("the over-size file was opened")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)
    out = run(root, max_file_bytes=1000)
    assert out["big.md"]["reason"] == "too_large" and out["big.md"]["size"] == 5000
    assert out["small.md"]["kind"] == "doc"


def test_p6_extracted_text_over_the_cap_is_truncated_and_flagged(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "long.md").write_text("# Long\n\n" + "word " * 10000)
    out = run(root, max_chars=1000)
    assert len(out["long.md"]["text"]) == 1000 and out["long.md"]["meta"]["truncated"] is True


# -- P8 hostile file names -----------------------------------------------------------------------------


def test_p8_hostile_file_names(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    names = [
        "new\nline.md",
        "ctrl\x07bell.md",
        "-leading-dash.md",
        ("n" * 250) + ".md",
        unicodedata.normalize("NFC", "café.md"),
        unicodedata.normalize("NFD", "café.md"),
        "sp ace #%.md",
    ]
    for name in names:
        (root / name).write_text(f"# {name!r}\n")
    bad = os.fsencode(str(root)) + b"/bad\xff\xfename.md"
    with open(bad, "wb") as fh:
        fh.write(b"# bad name\n")
    out = list(normalize([str(root)], root=str(root), options=NormalizeOptions(redact_key=b"k")))
    docs = [r for r in out if r["kind"] == "doc"]
    errors = [r for r in out if r["kind"] == "error"]
    assert len(docs) == len(names)
    for d in docs:
        assert (root / d["path"]).read_text().startswith("# ")  # the stored path opens the same file
    assert len(errors) == 1 and errors[0]["reason"] == "bad_filename" and "\\xff" in errors[0]["message"]
