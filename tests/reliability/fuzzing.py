"""RELIABILITY.md P7: the fuzz harness shared by tests/reliability/test_fuzz.py (a short,
derandomized run in the default suite) and bench/fuzz_soak.py (the >= 100,000-case soak).

A *target* turns one input (bytes) into an outcome and says which of these it was:

    ok          a valid document or record stream (serializable as JSON Lines)
    classified  a typed, classified failure: ParseFailure / KgrError / an ``error`` record,
                or what the parser child classifies on purpose (RecursionError, MemoryError)
    library     (child formats only) an exception raised inside a third-party parser
                (pdfminer, lxml, python-docx, ...), which the child's safety net in
                kgr.parsers.parse_in_child records as ``malformed``; counted, not a crash
    crash       anything else: an exception whose innermost frame is kgr's own code, an
                exception escaping an in-process stage, an output that cannot be written
                as JSON, or a result the child wrapper cannot express

A case that runs longer than the time limit is a ``hang`` (SIGALRM, checked per case).
Inputs are Hypothesis-generated or Hypothesis-mutated seed bytes (bit flips, truncation,
splicing, inserted control/NUL bytes, deep nesting, huge attributes).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import signal
import tempfile
import time
import traceback
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import orjson
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "kb"
KGR_DIR = str(REPO / "kgr")

# Reasons a normalize error record may carry (kgr.parsers, kgr.isolation, kgr.normalize).
logging.getLogger("pdfminer").setLevel(logging.ERROR)  # malformed PDFs warn on every case
logging.getLogger("pdfplumber").setLevel(logging.ERROR)

KNOWN_REASONS = {
    "binary",
    "encrypted",
    "malformed",
    "dtd",
    "zip_bomb",
    "too_many_pages",
    "too_large",
    "timeout",
    "memory",
    "recursion",
    "crash",
    "unsupported",
    "unreadable",
    "redaction_timeout",
}


class Hang(BaseException):
    """Raised by the per-case alarm; a BaseException so no `except Exception` swallows it."""


@contextlib.contextmanager
def time_limit(cpu_s: float, wall_s: float | None = None):
    """Raise Hang after ``cpu_s`` of CPU time (ITIMER_PROF: a busy machine does not make a
    case look hung) or ``wall_s`` of wall time (a case stuck without using CPU)."""
    wall_s = wall_s if wall_s is not None else 10 * cpu_s

    def fire(signum, frame):
        raise Hang(f"over {cpu_s:g}s of CPU" if signum == signal.SIGPROF else f"over {wall_s:g}s of wall time")

    old = {sig: signal.signal(sig, fire) for sig in (signal.SIGPROF, signal.SIGALRM)}
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, wall_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if outer:  # an enclosing alarm (pytest-timeout's) goes on with what it had left
            signal.setitimer(signal.ITIMER_REAL, max(0.001, outer - (time.monotonic() - started)))


@dataclass
class Outcome:
    kind: str  # ok, classified, library, crash, hang
    detail: str = ""
    seconds: float = 0.0  # wall time
    cpu: float = 0.0  # CPU time of this process (wall time on a busy machine is mostly waiting)


@dataclass
class Stats:
    cases: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    library: dict[str, int] = field(default_factory=dict)
    crashes: list[tuple[str, bytes]] = field(default_factory=list)
    hangs: list[tuple[str, bytes]] = field(default_factory=list)
    slowest: float = 0.0
    slowest_size: int = 0
    slowest_data: bytes = b""
    slowest_cpu: float = 0.0
    seconds: float = 0.0
    max_cpu: float = 0.0

    def add(self, out: Outcome, data: bytes) -> None:
        self.cases += 1
        self.seconds += out.seconds
        self.outcomes[out.kind] = self.outcomes.get(out.kind, 0) + 1
        if out.seconds > self.slowest:
            self.slowest, self.slowest_size, self.slowest_data, self.slowest_cpu = out.seconds, len(data), data, out.cpu
        self.max_cpu = max(self.max_cpu, out.cpu)
        if out.kind == "library":
            self.library[out.detail] = self.library.get(out.detail, 0) + 1
        elif out.kind == "crash" and len(self.crashes) < 50:
            self.crashes.append((out.detail, data))
        elif out.kind == "hang" and len(self.hangs) < 50:
            self.hangs.append((out.detail, data))


def _owner(exc: BaseException) -> str:
    """Whose code raised: "kgr" when the innermost frame of kgr or of a third-party package
    is kgr's (kgr called the standard library and did not handle its error), else the
    package's directory name (pdfminer, lxml, docx, ...)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith(KGR_DIR):
            return "kgr"
        if "site-packages" in frame.filename:
            return Path(frame.filename.split("site-packages/", 1)[1]).parts[0]
    return "kgr"


def _describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}{where}: {str(exc)[:160]}"


def run_case(target: "Target", data: bytes, limit_s: float, wall_s: float | None = None) -> Outcome:
    """One case, with ``limit_s`` of CPU time (and ``wall_s``, default 10x, of wall time)."""
    started, cpu = time.perf_counter(), time.process_time()
    try:
        with time_limit(limit_s, wall_s):
            kind, detail = target.fn(data)
    except Hang as exc:
        kind, detail = "hang", str(exc)
    except Exception as exc:  # the property under test: anything escaping a target is a crash
        kind, detail = "crash", _describe(exc)
    return Outcome(kind, detail, time.perf_counter() - started, time.process_time() - cpu)


# -- seeds --------------------------------------------------------------------------------------------------


def _minimal_pdf(text: str = "Hello fuzz") -> bytes:
    """A one-page PDF with an uncompressed content stream and a correct xref, so mutations
    reach the object and content-stream parsers instead of only breaking a zlib stream."""
    content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET\nBT /F1 18 Tf 72 690 Td (Heading [x] <41>) Tj ET".encode()
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return pdf_from_objects(objs)


def pdf_from_objects(objs: list[bytes]) -> bytes:
    """A PDF of the numbered object bodies ``objs`` (1 is the catalog), with a correct xref."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def _reportlab_pdf() -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, pageCompression=0)
    c.setFont("Helvetica-Bold", 18)
    c.drawString(72, 760, "Fare engine failover")
    c.setFont("Helvetica", 11)
    for i, line in enumerate(["Step 1: drain the queue.", "- a bullet line", "Page 1 of 2", "Body text goes here."]):
        c.drawString(72, 730 - 16 * i, line)
    c.showPage()
    c.drawString(72, 760, "Second page body.")
    c.showPage()
    c.save()
    return buf.getvalue()


def _docx_bytes() -> bytes:
    import docx

    d = docx.Document()
    d.add_heading("Ops review", level=1)
    d.add_paragraph("A paragraph with text.")
    d.add_paragraph("first item", style="List Bullet")
    d.add_paragraph("numbered", style="List Number")
    t = d.add_table(rows=2, cols=2)
    t.cell(0, 0).text, t.cell(0, 1).text, t.cell(1, 0).text, t.cell(1, 1).text = "a", "b|c", "1", "2"
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


HTML_SEEDS = [
    b"<html><head><title>T | site</title><script>var x=1</script></head><body><nav class='breadcrumb'><a>Home</a> &gt; "
    b"<a>Docs</a></nav><main><h1>Title</h1><p>Some <b>bold</b> text.</p><div hidden>h</div>"
    b"<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table><pre><code>x=1</code></pre>"
    b"<ul><li>one</li><li>two</li></ul><!-- c --></main></body></html>",
    b"<p style='display:none'>x</p><article><h2>A</h2><p>b</p></article>",
]

FRONT_MATTER_SEEDS = [
    b"---\ntitle: Fare engine\ntags: [payments, core]\nowner: rider-systems\ndate: 2025-03-01\n---\n# Fare engine\n\nText.\n",
    b"---\nkeywords: a, b, c\nnested: {a: [1, 2, {b: c}]}\nwhen: 2025-03-01T10:00:00Z\n---\nBody paragraph.\n",
    b"---\n---\nno front matter content\n",
]

TEXT_SEEDS = [
    b"# Title\n\nA paragraph that is long enough to be deduplicated if repeated, with several words in it.\n\n"
    b"A paragraph that is long enough to be deduplicated if repeated, with several words in it.\n\n"
    b"```\ncode\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- item\n1. step\n",
    b"\xef\xbb\xbfBOM text\r\nCR\rline\n",
    "\ufeffUTF-16 text\n".encode("utf-16-le"),
]


@functools.lru_cache(maxsize=None)
def seeds(fmt: str, shared: str | None = None) -> tuple[bytes, ...]:
    """Seed files of a format: the examples, generated P2-P5 style fixtures, and (for
    Markdown) a few files of the PowerShell corpus when ``shared`` is given."""
    ext = {"md": (".md",), "txt": (".txt",), "html": (".html", ".htm"), "pdf": (".pdf",), "docx": (".docx",)}[fmt]
    found = [p.read_bytes() for p in sorted(EXAMPLES.rglob("*")) if p.suffix in ext]
    if fmt == "md":
        found = [d for d in found if len(d) < 12000][:6] + FRONT_MATTER_SEEDS + TEXT_SEEDS[:1]
        if shared:
            corpus = sorted((Path(shared) / "corpora" / "powershell-docs").rglob("*.md"))
            found += [p.read_bytes()[:20000] for p in corpus[:: max(1, len(corpus) // 8)][:8]]
    elif fmt == "txt":
        found += TEXT_SEEDS
    elif fmt == "html":
        found += HTML_SEEDS
    elif fmt == "pdf":
        found = [_minimal_pdf(), _reportlab_pdf()] + [d for d in found if len(d) < 200_000]
    elif fmt == "docx":
        found = [_docx_bytes()] + [d for d in found if len(d) < 200_000]
    return tuple(found)


# -- mutation strategies -------------------------------------------------------------------------------------

CONTROL_BYTES = [
    b"\x00",
    b"\x01",
    b"\x07",
    b"\x1b",
    b"\x7f",
    b"\r",
    b"\x0c",
    b"\xff",
    b"\xfe\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xef\xbf\xbe",
    b"\xe2\x80\xae",
    b"\n---\n",
    b"\n```\n",
]
CONTROL = st.sampled_from(CONTROL_BYTES)
NESTERS = {
    "html": [b"<div>", b"<table><tr><td>", b"<ul><li>", b"<b><i>", b"<a href='", b"<!--", b"<![CDATA["],
    "md": [b"> ", b"- ", b"[", b"{", b"  ", b"```", b"|", b"#"],
    "json": [b"[", b'{"a":', b'"', b"\\"],
    "pdf": [b"[", b"<<", b"(", b"<", b"q ", b"BT ", b"1 0 obj "],
    "xml": [b"<w:p>", b"<w:r><w:t>", b"<w:tbl><w:tr><w:tc>", b"<!DOCTYPE x>", b"&amp;"],
}


@st.composite
def mutated(draw, pool: tuple[bytes, ...], nest: str = "md", max_ops: int = 6, max_insert: int = 4096) -> bytes:
    """One seed (or two spliced) with a few random edits."""
    data = bytearray(draw(st.sampled_from(pool)))
    nesters = NESTERS.get(nest, NESTERS["md"])
    for _ in range(draw(st.integers(0, max_ops))):
        op = draw(
            st.sampled_from(
                ["flip", "byte", "delete", "dup", "insert_ctrl", "truncate", "splice", "nest", "huge_attr", "random"]
            )
        )
        pos = draw(st.integers(0, 1 << 30)) % (len(data) + 1)
        if op == "flip" and data:
            i = min(pos, len(data) - 1)
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and data:
            data[min(pos, len(data) - 1)] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 256))]
        elif op == "dup":
            n = draw(st.integers(1, 512))
            data[pos:pos] = data[pos : pos + n] * draw(st.integers(1, 8))
        elif op == "insert_ctrl":
            data[pos:pos] = draw(CONTROL) * draw(st.integers(1, 16))
        elif op == "truncate":
            del data[pos:]
        elif op == "splice":
            other = draw(st.sampled_from(pool))
            cut = draw(st.integers(0, 1 << 30)) % (len(other) + 1)
            data[pos:] = other[cut:]
        elif op == "nest":
            token = draw(st.sampled_from(nesters))
            data[pos:pos] = token * draw(st.integers(1, max(1, max_insert // len(token))))
        elif op == "huge_attr":
            fill = draw(st.sampled_from([b"A", b'"', b"&#", b"%", b" ", b"\\"]))
            data[pos:pos] = b' x="' + fill * draw(st.integers(1, max_insert * 4)) + b'" '
        elif op == "random":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=64))
    return bytes(data)


def havoc(data: bytes, rng, pool: tuple[bytes, ...], nest: str = "md") -> bytes:
    """A few random edits without Hypothesis (the soak derives several cases from each
    Hypothesis example this way: Hypothesis' own generation costs more than most cases)."""
    out = bytearray(data)
    nesters = NESTERS.get(nest, NESTERS["md"])
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(["flip", "byte", "delete", "dup", "insert_ctrl", "truncate", "splice", "nest", "huge_attr"])
        pos = rng.randint(0, len(out))
        if op == "flip" and out:
            out[min(pos, len(out) - 1)] ^= 1 << rng.randint(0, 7)
        elif op == "byte" and out:
            out[min(pos, len(out) - 1)] = rng.randint(0, 255)
        elif op == "delete":
            del out[pos : pos + rng.randint(1, 256)]
        elif op == "dup":
            out[pos:pos] = out[pos : pos + rng.randint(1, 512)] * rng.randint(1, 8)
        elif op == "insert_ctrl":
            out[pos:pos] = rng.choice(CONTROL_BYTES) * rng.randint(1, 16)
        elif op == "truncate":
            del out[pos:]
        elif op == "splice":
            other = rng.choice(pool)
            out[pos:] = other[rng.randint(0, len(other)) :]
        elif op == "nest":
            token = rng.choice(nesters)
            out[pos:pos] = token * rng.randint(1, 4096 // len(token))
        elif op == "huge_attr":
            out[pos:pos] = b' x="' + rng.choice([b"A", b'"', b"&#", b"%", b" ", b"\\"]) * rng.randint(1, 16384) + b'" '
    return bytes(out)


def any_bytes(pool: tuple[bytes, ...], nest: str) -> st.SearchStrategy[bytes]:
    """Mutated seeds most of the time, plain generated bytes/text otherwise."""
    return st.one_of(
        mutated(pool, nest),
        mutated(pool, nest),
        mutated(pool, nest),
        st.binary(max_size=2048),
        st.text(max_size=1024).map(lambda s: s.encode("utf-8", "surrogatepass")),
    )


# JSON values of every shape, for records whose fields have the wrong type
JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 70), 1 << 70),
    st.floats(allow_nan=True),
    st.text(max_size=40),
    st.sampled_from(["", "doc", "chunk", "a.md", "a.md#0", "PERSON", "0"]),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=6,
)


def _json_line(value: Any) -> bytes:
    import json

    try:
        return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass") + b"\n"
    except (TypeError, ValueError):
        return b"{}\n"


@st.composite
def generated_record(draw, seed_records: tuple[dict, ...]) -> dict:
    """A real record of the pipeline with fields dropped, retyped or added."""
    rec = dict(draw(st.sampled_from(seed_records)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["retype", "retype", "drop", "add", "kind"]))
        keys = sorted(rec)
        if op == "retype" and keys:
            rec[draw(st.sampled_from(keys))] = draw(JSON_VALUES)
        elif op == "drop" and keys:
            rec.pop(draw(st.sampled_from(keys)))
        elif op == "add":
            rec[
                draw(
                    st.sampled_from(
                        [
                            "start",
                            "end",
                            "ord",
                            "embedding",
                            "model",
                            "dim",
                            "entity",
                            "src_surface",
                            "aliases",
                            "meta",
                            "prelude",
                            "title",
                            "key",
                            "evidence",
                        ]
                    )
                )
            ] = draw(JSON_VALUES)
        elif op == "kind":
            rec["kind"] = draw(st.sampled_from(["doc", "chunk", "mention", "entity", "relation", "error", "other"]))
    return rec


def jsonl_inputs(seed_records: tuple[dict, ...], seed_lines: tuple[bytes, ...]) -> st.SearchStrategy[bytes]:
    """Record streams: seed streams with retyped records in them, mutated bytes, raw junk."""
    stream = st.lists(st.one_of(st.sampled_from(seed_records), generated_record(seed_records)), min_size=1, max_size=6)
    return st.one_of(
        stream.map(lambda recs: b"".join(_json_line(r) for r in recs)),
        stream.map(lambda recs: b"".join(_json_line(r) for r in recs)),
        mutated(seed_lines, "json"),
        st.lists(JSON_VALUES, max_size=4).map(lambda vs: b"".join(_json_line(v) for v in vs)),
        st.binary(max_size=512),
    )


# -- targets --------------------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    fn: Callable[[bytes], tuple[str, str]]
    strategy: Callable[[], st.SearchStrategy[bytes]]
    pool: Callable[[], tuple[bytes, ...]] = lambda: (b"",)  # seeds, for havoc and the warm-up
    nest: str = "md"


def _check_doc(text: str, meta: dict, fmt: str) -> dict:
    """The parent's half of normalize for a parsed text: what the stage would write."""
    from kgr import jsonl
    from kgr.stages.normalize import FileRef, NormalizeOptions, finish_doc

    opts = NormalizeOptions(redact_key=b"k")
    ref = FileRef("/nonexistent/x." + fmt, "dir/x." + fmt, 0, 0)
    doc = finish_doc(ref, fmt, text, meta, opts, b"k", None)
    jsonl.dumps(doc)  # a record that cannot be written is a crash of the stage
    if not isinstance(doc["text"], str) or "\x00" in doc["text"]:
        raise AssertionError("doc text is not NUL-free text")
    return doc


def _text_target(fmt: str) -> Callable[[bytes], tuple[str, str]]:
    def run(data: bytes) -> tuple[str, str]:
        from kgr.errors import ParseFailure
        from kgr.stages.parsers import parse_text

        try:
            text, meta = parse_text(data, fmt)
        except ParseFailure as exc:
            return "classified", exc.reason
        _check_doc(text, meta, fmt)  # in the parent process: only ParseFailure is classified
        return "ok", ""

    return run


_TMP: dict[str, str] = {}


def _scratch(fmt: str, data: bytes) -> str:
    if "dir" not in _TMP:
        _TMP["dir"] = tempfile.mkdtemp(prefix="kgr-fuzz-")
    path = os.path.join(_TMP["dir"], f"case.{fmt}")
    with open(path, "wb") as fh:
        fh.write(data)
    return path


def child_outcome(fmt: str, path: str) -> tuple[str, str]:
    """What the parser child does with one file (kgr.parsers.parse_file, in this process).

    ParseFailure, RecursionError and MemoryError are classified by design; an exception
    from a third-party parser is what the child's safety net records as ``malformed``
    (counted as ``library``); an exception raised by kgr's own code is a crash."""
    from kgr.errors import ParseFailure
    from kgr.stages.parsers import Limits, parse_file

    try:
        text, meta = parse_file(path, fmt, Limits())
    except ParseFailure as exc:
        if exc.reason not in KNOWN_REASONS:
            return "crash", f"unknown reason {exc.reason!r}"
        return "classified", exc.reason
    except (RecursionError, MemoryError) as exc:
        return "classified", type(exc).__name__
    except Exception as exc:
        owner = _owner(exc)
        if owner == "kgr":
            raise
        return "library", f"{type(exc).__name__} in {owner}"
    if not isinstance(text, str) or not isinstance(meta, dict):
        return "crash", "the parser returned something other than (str, dict)"
    _check_doc(text, meta, fmt)
    return "ok", ""


def _child_target(fmt: str) -> Callable[[bytes], tuple[str, str]]:
    def run(data: bytes) -> tuple[str, str]:
        return child_outcome(fmt, _scratch(fmt, data))

    return run


def _docx_xml_target(data: bytes) -> tuple[str, str]:
    """A valid zip whose word/document.xml is the fuzzed bytes (reaches python-docx's XML)."""
    base = seeds("docx")[0]
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as zin, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, data if info.filename == "word/document.xml" else zin.read(info.filename))
    return child_outcome("docx", _scratch("docx", buf.getvalue()))


@functools.lru_cache(maxsize=None)
def docx_xml_seeds() -> tuple[bytes, ...]:
    with zipfile.ZipFile(io.BytesIO(seeds("docx")[0])) as z:
        return (z.read("word/document.xml"),)


# -- stage record readers --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def seed_stream() -> tuple[tuple[dict, ...], tuple[bytes, ...]]:
    """Real records: two example documents through normalize (in-process), chunk, extract,
    link and a stub embed; the records, and each record's JSON line."""
    from kgr import records
    from kgr.embedders import StubEmbedder
    from kgr.stages import chunk, embed, extract, link
    from kgr.stages.normalize import FileRef, NormalizeOptions, finish_doc
    from kgr.stages.parsers import parse_text

    docs = []
    for rel in ("services/fare-engine.md", "runbooks/night-shift-notes.txt"):
        p = EXAMPLES / rel
        text, meta = parse_text(p.read_bytes()[:4000], p.suffix[1:])
        docs.append(
            finish_doc(
                FileRef(str(p), rel, p.stat().st_size, 0),
                p.suffix[1:],
                text,
                meta,
                NormalizeOptions(redact_key=b"k"),
                b"k",
                None,
            )
        )
    recs = list(link.link(extract.extract(chunk.chunk(docs, max_tokens=64), extractor=_extractor())))
    recs = list(embed.embed(recs, StubEmbedder(dim=8)))
    recs.append(
        records.error("normalize", "broken.pdf: not a readable PDF", path="broken.pdf", reason="malformed", size=3)
    )
    kinds = {r["kind"] for r in recs}
    assert {"doc", "chunk", "mention", "entity", "relation", "error"} <= kinds, kinds
    return tuple(recs), tuple(orjson.dumps(r) + b"\n" for r in recs) + (
        b"".join(orjson.dumps(r) + b"\n" for r in recs[:6]),
    )


@functools.lru_cache(maxsize=None)
def _extractor():
    from kgr.stages import extract

    return extract.Extractor(nlp=extract.load_nlp())


def _stage(name: str, data: bytes) -> list[dict]:
    from kgr import jsonl

    recs = jsonl.read(io.BytesIO(data), stage="input")
    if name == "reader":
        return list(recs)
    if name == "chunk":
        from kgr.stages import chunk

        return list(chunk.chunk(recs, max_tokens=64))
    if name == "extract":
        from kgr.stages import extract

        return list(extract.extract(recs, extractor=_extractor()))
    if name == "link":
        from kgr.stages import link

        return list(link.link(recs))
    if name == "embed":
        from kgr.embedders import StubEmbedder
        from kgr.stages import embed

        return list(embed.embed(recs, StubEmbedder(dim=8), batch_size=4))
    if name == "load":
        from kgr.stages import load
        from kgr.store import Store

        path = _scratch("sqlite", b"")
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path + suffix)
        with Store(path) as store:
            summary = load.load(recs, store)
        return [{"kind": "summary", "line": summary.line()}]
    raise ValueError(name)


def _stage_target(name: str) -> Callable[[bytes], tuple[str, str]]:
    def run(data: bytes) -> tuple[str, str]:
        from kgr import jsonl
        from kgr.errors import KgrError

        try:
            out = _stage(name, data)
        except KgrError as exc:  # the CLI's error boundary turns this into one line and exit 1
            return "classified", type(exc).__name__
        errors = 0
        for rec in out:
            if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str):
                return "crash", f"the stage emitted {type(rec).__name__} without a kind"
            jsonl.dumps(rec)  # raises on a record the stage cannot write
            errors += rec["kind"] == "error"
        return ("classified", "error record") if errors else ("ok", "")

    return run


def targets(shared: str | None = None) -> dict[str, Target]:
    stream = lambda: jsonl_inputs(*seed_stream())  # noqa: E731
    t = [
        Target(
            "markdown", _text_target("md"), lambda: any_bytes(seeds("md", shared), "md"), lambda: seeds("md", shared)
        ),
        Target("text", _text_target("txt"), lambda: any_bytes(seeds("txt"), "md"), lambda: seeds("txt")),
        Target(
            "front_matter",
            _text_target("md"),
            lambda: st.one_of(
                mutated(tuple(FRONT_MATTER_SEEDS), "json"),
                st.tuples(JSON_VALUES, st.text(max_size=200)).map(
                    lambda v: b"---\n" + _yaml(v[0]) + b"---\n" + v[1].encode("utf-8", "surrogatepass")
                ),
            ),
            lambda: tuple(FRONT_MATTER_SEEDS),
            "json",
        ),
        Target("html", _child_target("html"), lambda: any_bytes(seeds("html"), "html"), lambda: seeds("html"), "html"),
        Target("pdf", _child_target("pdf"), lambda: mutated(seeds("pdf"), "pdf"), lambda: seeds("pdf"), "pdf"),
        Target("docx", _child_target("docx"), lambda: mutated(seeds("docx"), "xml"), lambda: seeds("docx"), "xml"),
        Target("docx_xml", _docx_xml_target, lambda: mutated(docx_xml_seeds(), "xml"), docx_xml_seeds, "xml"),
    ]
    t += [
        Target(f"{n}_records", _stage_target(n), stream, lambda: seed_stream()[1], "json")
        for n in ("reader", "chunk", "extract", "link", "embed", "load")
    ]
    return {x.name: x for x in t}


def warm_up(name: str, shared: str | None = None) -> None:
    """Run a target over its seeds, and the doc path over an English text (the language
    model), so that imports and models load outside the timings."""
    target = targets(shared)[name]
    for data in target.pool():
        run_case(target, data, 600)
    _check_doc(
        ("An English paragraph, long enough for the language model and the de-duplication. " * 2 + "\n\n") * 3, {}, "md"
    )


def _yaml(value: Any) -> bytes:
    import yaml

    try:
        return yaml.safe_dump({"title": value, "tags": value}, allow_unicode=True).encode("utf-8", "surrogatepass")
    except Exception:
        return b"title: x\n"
