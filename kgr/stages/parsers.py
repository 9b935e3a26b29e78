"""Format parsers: file bytes to Markdown text. HTML, PDF and DOCX run in a child process.

Each parser returns ``(text, meta)`` or raises ParseFailure(reason, message) with a short
reason class (binary, encrypted, malformed, dtd, zip_bomb, too_many_pages, ...). The
parent (kgr.stages.normalize) redacts, de-duplicates and hashes what comes back.
"""

from __future__ import annotations

import codecs
import re
import statistics
import threading
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

from kgr.config import NormalizeSettings
from kgr.errors import ParseFailure

TEXT_FORMATS = {".md": "md", ".markdown": "md", ".txt": "txt", ".text": "txt"}
CHILD_FORMATS = {".html": "html", ".htm": "html", ".pdf": "pdf", ".docx": "docx"}
FORMATS = {**TEXT_FORMATS, **CHILD_FORMATS}

MAGIC = [
    (b"\x89PNG", "png"),
    (b"\x7fELF", "elf"),
    (b"PK\x03\x04", "zip"),
    (b"SQLite format 3\x00", "sqlite"),
    (b"%PDF-", "pdf"),
    (b"GIF8", "gif"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole"),
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ", "xz"),
    (b"MZ", "exe"),
]


_NORMALIZE = NormalizeSettings()  # the limits' defaults are the settings'


@dataclass
class Limits:
    max_pages: int = _NORMALIZE.max_pages
    max_chars: int = _NORMALIZE.max_chars
    max_zip_bytes: int = _NORMALIZE.max_zip_bytes
    max_zip_ratio: int = _NORMALIZE.max_zip_ratio
    max_zip_members: int = 10000
    max_stream_bytes: int = 256 * 1024 * 1024  # one PDF stream inflated (pdf_oxide caps at 256 MB)


# -- text ----------------------------------------------------------------------------


def sniff_binary(head: bytes) -> str | None:
    """The kind of binary a file is, from its first bytes; None for text.

    Git's rule (a NUL in the first 8,000 bytes) after allowing for UTF-16/32 byte-order
    marks, plus the magic numbers of common binary formats.
    """
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return None
    for magic, kind in MAGIC:
        if head.startswith(magic):
            return kind
    if b"\x00" in head[:8000]:
        return "nul"
    return None


def decode_text(data: bytes) -> str:
    """Bytes to str without ever raising: BOMs honoured, invalid UTF-8 becomes U+FFFD,
    NULs removed, CR and CRLF line ends become LF."""
    return decode_text_counted(data)[0]


_replacements = threading.local()


def _count_replacement(exc: UnicodeError):
    _replacements.n += 1
    return "\ufffd", exc.end


codecs.register_error("kgr.count_replace", _count_replacement)


def decode_text_counted(data: bytes) -> tuple[str, int]:
    """:func:`decode_text`, and how many invalid byte sequences became U+FFFD (a U+FFFD
    that was in the file is not counted)."""
    text, _, count = decode_text_reporting(data)
    return text, count


def decode_text_reporting(data: bytes) -> tuple[str, str, int]:
    """(text, encoding name, invalid byte sequences replaced)."""
    return decode_text_full(data)[:3]


def decode_text_full(data: bytes) -> tuple[str, str, int, int]:
    """(text, encoding name, invalid byte sequences replaced, NUL characters removed)."""
    for bom, enc, name in (
        (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
        (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
        (codecs.BOM_UTF8, "utf-8", "UTF-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
        (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
    ):
        if data.startswith(bom):
            body = data[len(bom) :]
            break
    else:
        body, enc, name = data, "utf-8", "UTF-8"
    try:
        text, count = body.decode(enc), 0
    except UnicodeDecodeError:
        _replacements.n = 0
        text = body.decode(enc, errors="kgr.count_replace")
        count = _replacements.n
    nuls = text.count("\x00")
    if nuls:
        text = text.replace("\x00", "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    # lone surrogates cannot be stored as UTF-8
    return text.encode("utf-8", "replace").decode("utf-8"), name, count, nuls


def undecodable_share(text: str) -> float:
    return text.count("\ufffd") / max(1, len(text))


def parse_text(data: bytes, fmt: str) -> tuple[str, dict[str, Any]]:
    kind = sniff_binary(data[:8192])
    if kind is not None:
        raise ParseFailure("binary", f"binary content ({kind}) in a .{fmt} file")
    text, encoding, replaced, nuls = decode_text_full(data)
    if len(text) > 1000 and undecodable_share(text) > 0.01:
        raise ParseFailure("binary", "more than 1% of the bytes are not text")
    meta: dict[str, Any] = {}
    if replaced:
        meta["invalid_sequences"] = {"encoding": encoding, "count": replaced}
    if nuls:  # past the binary sniff's first 8,000 bytes: removed, and said so
        meta["nul_removed"] = nuls
    return text, meta


# -- HTML ----------------------------------------------------------------------------

BOILERPLATE_TAGS = [
    "script",
    "style",
    "template",
    "noscript",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "iframe",
    "svg",
    "button",
    "dialog",
    "object",
    "embed",
    "canvas",
    "select",
]
HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)


def _hidden(el) -> bool:
    attrs = getattr(el, "attrs", None) or {}
    style = attrs.get("style", "") or ""
    return (
        "hidden" in attrs
        or attrs.get("aria-hidden") == "true"
        or bool(HIDDEN_STYLE.search(style if isinstance(style, str) else ""))
    )


def parse_html(data: bytes, limits: Limits) -> tuple[str, dict[str, Any]]:
    """Main content to Markdown. Hidden elements are dropped (policy: hidden text is not content)."""
    import html2text
    from bs4 import BeautifulSoup, Comment

    soup = BeautifulSoup(data, "lxml")
    meta: dict[str, Any] = {}
    if (soup.original_encoding or "").lower().replace("_", "-") in ("utf-8", "utf8"):
        # lxml replaces invalid UTF-8 with U+FFFD without a word (contains_replacement_characters stays False)
        _, _, replaced = decode_text_reporting(data)
        if replaced:
            meta["invalid_sequences"] = {"encoding": "UTF-8", "count": replaced}
    title_tag = soup.find("title")
    if title_tag and title_tag.get_text(strip=True):
        meta["html_title"] = title_tag.get_text(" ", strip=True)
    crumbs = soup.select('[aria-label*="readcrumb"], [class*="breadcrumb"], [id*="breadcrumb"]')
    if crumbs:
        parts = [a.get_text(" ", strip=True) for a in crumbs[0].find_all(["a", "li", "span"]) if a.get_text(strip=True)]
        if not parts:
            parts = [p.strip() for p in re.split(r"[›»>/|]", crumbs[0].get_text(" ", strip=True)) if p.strip()]
        meta["breadcrumbs"] = list(dict.fromkeys(parts))
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    hidden = [el for el in soup.find_all(True) if _hidden(el)]
    for el in hidden:
        if not getattr(el, "decomposed", False):
            el.decompose()
    main = soup.find("main") or soup.find(attrs={"role": "main"}) or soup.find("article")
    root = main if main is not None else (soup.body or soup)
    for tag in root.find_all(BOILERPLATE_TAGS):
        tag.decompose()
    h = html2text.HTML2Text()
    h.body_width = 0
    h.ignore_images = True
    h.unicode_snob = True
    h.ignore_emphasis = False
    h.protect_links = False
    h.single_line_break = False
    text = _pipe_tables(h.handle(str(root)))
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    return text, meta


def _pipe_tables(text: str) -> str:
    """html2text writes "a| b" rows; give every row of a table leading and trailing pipes."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if re.fullmatch(r"\s*-{3,}(?:\s*\|\s*-{3,})+\s*", line):
            start = i - 1
            end = i + 1
            while end < len(lines) and "|" in lines[end] and lines[end].strip():
                end += 1
            for k in range(max(0, start), end):
                cells = [c.strip() for c in lines[k].split("|")]
                lines[k] = "| " + " | ".join(cells) + " |"
    return "\n".join(lines)


# -- PDF ------------------------------------------------------------------------------

BOMB_FLOOR = 50 * 1024 * 1024  # xpdf: a bomb is > 50 MB out of less than 1/250 of that in
BOMB_RATIO = 250


def _inflate(data: bytes, limits: Limits, *, lenient: bool = False) -> bytes:
    """zlib.decompress for pdfminer, counting output while inflating: a FlateDecode stream
    past ``max_stream_bytes``, or past 50 MB at a ratio over 250:1, is a bomb.

    With ``lenient`` (pdfminer's decompress_corrupted: a bad checksum or a truncated
    stream), what inflated before the error is kept, as pdfminer does, but in linear time
    (pdfminer feeds one byte at a time and concatenates, quadratic in the output)."""
    d = zlib.decompressobj()
    out: list[bytes] = []
    total = 0

    def take(piece: bytes) -> None:
        nonlocal total
        total += len(piece)
        if total > limits.max_stream_bytes or (total > BOMB_FLOOR and total > BOMB_RATIO * len(data)):
            raise ParseFailure("too_large", f"a compressed PDF stream of {len(data)} bytes inflates past {total} bytes")
        out.append(piece)

    if not lenient:
        take(d.decompress(data, 1 << 20))
        while d.unconsumed_tail and not d.eof:
            take(d.decompress(d.unconsumed_tail, 1 << 20))
        if not d.eof:
            raise zlib.error("incomplete or truncated stream")
        return b"".join(out)
    step = 1 << 14
    for pos in range(0, len(data), step):
        block = data[pos : pos + step]
        saved = d.copy()
        try:
            take(d.decompress(block))
            continue
        except zlib.error:
            d = saved  # find the failing byte, as pdfminer does, within this block only
        for i in range(len(block)):
            try:
                take(d.decompress(block[i : i + 1]))
            except zlib.error:
                if pos + i < len(data) - 3:  # not in the checksum: pdfminer gives up on the stream
                    raise
                return b"".join(out)
    return b"".join(out)


class _BoundedZlib:
    """Stands in for the ``zlib`` module inside pdfminer.pdftypes (in the parser child)."""

    error = zlib.error

    def __init__(self, limits: Limits):
        self.limits = limits

    def decompress(self, data: bytes, *args) -> bytes:
        return _inflate(data, self.limits)

    def decompressobj(self, *args, **kwargs):
        return zlib.decompressobj(*args, **kwargs)


def _bound_pdf_streams(limits: Limits) -> None:
    import pdfminer.pdftypes as pdftypes

    pdftypes.zlib = _BoundedZlib(limits)
    pdftypes.decompress_corrupted = lambda data: _inflate(data, limits, lenient=True)


def parse_pdf(path: str, limits: Limits) -> tuple[str, dict[str, Any]]:
    import pdfplumber
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfparser import PDFSyntaxError

    _bound_pdf_streams(limits)
    try:
        pdf = pdfplumber.open(path)
    except (PDFPasswordIncorrect, PDFEncryptionError) as exc:
        raise ParseFailure("encrypted", f"encrypted PDF ({type(exc).__name__})") from None
    except PDFSyntaxError as exc:
        raise ParseFailure("malformed", f"not a readable PDF: {exc}") from None
    except ParseFailure:
        raise
    except Exception as exc:  # pdfplumber wraps pdfminer's errors in PdfminerException
        inner = exc.args[0] if exc.args else exc
        if isinstance(inner, ParseFailure):
            raise inner from None
        name = type(inner).__name__ if isinstance(inner, BaseException) else str(inner)
        if "Password" in name or "Encrypt" in name:
            raise ParseFailure("encrypted", f"encrypted PDF ({name})") from None
        raise ParseFailure("malformed", f"not a readable PDF: {name}: {str(inner)[:120]}") from None
    try:
        return _pdf_pages(pdf, limits)
    except Exception as exc:  # pdfplumber wraps what pdfminer raises, our stream cap included
        inner = exc.args[0] if exc.args else None
        if isinstance(inner, ParseFailure) and not isinstance(exc, ParseFailure):
            raise inner from None
        raise


def _pdf_pages(pdf, limits: Limits) -> tuple[str, dict[str, Any]]:
    with pdf:
        n = len(pdf.pages)
        if n > limits.max_pages:
            raise ParseFailure("too_many_pages", f"{n} pages, more than the limit of {limits.max_pages}")
        pages: list[list[tuple[str, float]]] = []
        total = 0
        for page in pdf.pages:
            try:
                lines = page.extract_text_lines(layout=False, strip=True, return_chars=True)
            finally:
                page.close()
            out = []
            for line in lines:
                sizes = [c.get("size", 0) for c in line.get("chars", []) if c.get("text", "").strip()]
                out.append((line["text"], statistics.median(sizes) if sizes else 0.0))
            pages.append(out)
            total += sum(len(t) for t, _ in out)
            if total > limits.max_chars:
                break
    # pages left unread: the text's true length is unknown (finish_doc says "at least")
    return _pdf_markdown(pages), {"pages": n, **({"stopped_early": True} if len(pages) < n else {})}


def _pdf_markdown(pages: list[list[tuple[str, float]]]) -> str:
    """Drop running headers and footers, mark larger-type lines as headings, join paragraphs."""

    def key(line: str) -> str:
        return re.sub(r"\d+", "#", line.strip().lower())

    edges: dict[str, int] = {}
    for lines in pages:
        for text, _ in lines[:2] + lines[-2:]:
            edges[key(text)] = edges.get(key(text), 0) + 1
    running = {k for k, c in edges.items() if len(pages) >= 2 and c >= max(2, len(pages) // 2)}
    sizes = [s for lines in pages for _, s in lines if s]
    body = statistics.median(sizes) if sizes else 0.0
    blocks: list[str] = []
    para: list[str] = []
    for lines in pages:
        for i, (text, size) in enumerate(lines):
            if key(text) in running and (i < 2 or i >= len(lines) - 2):
                continue
            if re.fullmatch(r"(?:page\s+)?\d+(?:\s*(?:/|of)\s*\d+)?", text.strip(), re.I):
                continue
            heading = body and size >= body * 1.15 and len(text) < 120
            bullet = re.match(r"^\s*[•▪◦●·-]\s+", text)
            numbered = re.match(r"^\s*(?:\d{1,3}[.)]|Step\s+\d+:)\s+", text)
            if heading or bullet or numbered:
                if para:
                    blocks.append(" ".join(para))
                    para = []
                if heading:
                    level = "#" if size >= body * 1.6 else "##"
                    blocks.append(f"{level} {text.strip()}")
                elif bullet:
                    para = ["- " + text[bullet.end() :].strip()]
                else:
                    para = [text.strip()]
                continue
            if para and (
                para[-1].endswith((".", ":", "!", "?")) and text[:1].isupper() and not para[0].startswith("- ")
            ):
                blocks.append(" ".join(para))
                para = []
            para.append(text.strip())
    if para:
        blocks.append(" ".join(para))
    out = []
    for b in blocks:
        if out and (b.startswith("- ") and out[-1].startswith("- ")):
            out[-1] += "\n" + b
        else:
            out.append(b)
    return "\n\n".join(out).strip() + "\n"


# -- DOCX ------------------------------------------------------------------------------

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def check_zip(path: str, limits: Limits) -> None:
    """Stream-check an OOXML package before any parser sees it: total inflated bytes and
    per-member ratio counted while inflating (headers are not trusted), member count,
    nested archives, and no DTD in any XML part (billion laughs, XXE)."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head.startswith(OLE_MAGIC):
        raise ParseFailure("encrypted", "an encrypted (OLE) Office document, not a zip package")
    if not head.startswith(b"PK"):
        raise ParseFailure("malformed", "not a zip package")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, NotImplementedError, EOFError, ValueError) as exc:
        # NotImplementedError: a central directory entry asking for a newer zip version
        raise ParseFailure("malformed", f"bad zip: {type(exc).__name__}: {str(exc)[:120]}") from None
    try:
        with zf:
            _check_members(zf, limits)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, ValueError) as exc:
        # a member that does not read back (bad header, CRC, method): found while streaming
        raise ParseFailure("malformed", f"bad zip: {type(exc).__name__}: {str(exc)[:120]}") from None
    except RuntimeError as exc:  # zipfile: "File ... is encrypted, password required"
        raise ParseFailure("encrypted", f"an encrypted zip member: {str(exc)[:120]}") from None


def _check_members(zf: zipfile.ZipFile, limits: Limits) -> None:
    infos = zf.infolist()
    if len(infos) > limits.max_zip_members:
        raise ParseFailure("zip_bomb", f"{len(infos)} members in the package")
    total = 0
    for info in infos:
        if info.filename.lower().endswith((".zip", ".docx", ".xlsx", ".jar")):
            raise ParseFailure("zip_bomb", f"nested archive {info.filename!r}")
        inflated = 0
        xml = info.filename.endswith((".xml", ".rels"))
        first = b""
        with zf.open(info) as member:
            while True:
                chunk = member.read(1 << 16)
                if not chunk:
                    break
                inflated += len(chunk)
                total += len(chunk)
                if xml and len(first) < 4096:
                    first += chunk[: 4096 - len(first)]
                    if b"<!doctype" in first.lower():
                        raise ParseFailure("dtd", f"a DTD in {info.filename} (entities are refused)")
                if total > limits.max_zip_bytes:
                    raise ParseFailure("zip_bomb", f"more than {limits.max_zip_bytes} bytes inflated")
                if inflated > 1 << 20 and inflated > limits.max_zip_ratio * max(1, info.compress_size):
                    raise ParseFailure("zip_bomb", f"{info.filename} inflates more than {limits.max_zip_ratio}:1")
        if xml and b"<!doctype" in first.lower():
            raise ParseFailure("dtd", f"a DTD in {info.filename} (entities are refused)")


def parse_docx(path: str, limits: Limits) -> tuple[str, dict[str, Any]]:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    check_zip(path, limits)
    try:
        document = docx.Document(path)
    except Exception as exc:  # python-docx raises many kinds on a broken package
        raise ParseFailure("malformed", f"not a readable DOCX: {type(exc).__name__}: {exc}") from None
    out: list[str] = []
    total = 0
    stopped = False
    body = getattr(document.element, "body", None)
    if body is None:  # python-docx opens a main part whose root is not <w:document>, or has no body
        raise ParseFailure("malformed", "word/document.xml has no <w:document><w:body>")
    for child in body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            para = Paragraph(child, document)
            text = para.text.strip()
            if not text:
                continue
            style = (para.style.name if para.style is not None else "") or ""
            m = re.match(r"Heading (\d)", style)
            if style == "Title":
                out.append(f"# {text}")
            elif m:
                out.append(f"{'#' * min(6, int(m.group(1)) + 0)} {text}")
            elif "List" in style:
                prefix = "1. " if "Number" in style else "- "
                if out and re.match(r"^(?:- |1\. )", out[-1].split("\n")[-1]):
                    out[-1] += "\n" + prefix + text
                else:
                    out.append(prefix + text)
            else:
                out.append(text)
        elif tag == "tbl":
            table = Table(child, document)
            rows = []
            for r, row in enumerate(table.rows):
                cells = [" ".join(c.text.split()).replace("|", "\\|") for c in row.cells]
                rows.append("| " + " | ".join(cells) + " |")
                if r == 0:
                    rows.append("|" + "|".join(" --- " for _ in cells) + "|")
            if rows:
                out.append("\n".join(rows))
        total += len(out[-1]) if out else 0
        if total > limits.max_chars:
            stopped = True
            break
    return "\n\n".join(out).strip() + "\n", ({"stopped_early": True} if stopped else {})


# -- dispatch (runs in the child) --------------------------------------------------------


def parse_file(path: str, fmt: str, limits: Limits) -> tuple[str, dict[str, Any]]:
    """Parse one file of a child format; the entry point run by the isolation pool."""
    if fmt == "html":
        with open(path, "rb") as fh:
            data = fh.read()
        kind = sniff_binary(data[:8192])
        if kind is not None:
            raise ParseFailure("binary", f"binary content ({kind}) in an .html file")
        return parse_html(data, limits)
    if fmt == "pdf":
        with open(path, "rb") as fh:
            if not fh.read(1024).lstrip().startswith(b"%PDF"):
                raise ParseFailure("malformed", "no %PDF header")
        return parse_pdf(path, limits)
    if fmt == "docx":
        return parse_docx(path, limits)
    raise ParseFailure("unsupported", f"no parser for {fmt}")


def parse_in_child(path: str, fmt: str, limits: Limits, parser: str | None = None) -> dict[str, Any]:
    """Child-side wrapper: results and classified failures as plain dicts (picklable)."""
    try:
        if parser:  # "module:function", for tests and plugins
            import importlib

            mod, func = parser.split(":")
            text, meta = getattr(importlib.import_module(mod), func)(path, fmt, limits)
        else:
            text, meta = parse_file(path, fmt, limits)
        return {"ok": True, "text": text, "meta": meta}
    except ParseFailure as exc:
        return {"ok": False, "reason": exc.reason, "message": exc.message}
    except MemoryError:
        return {"ok": False, "reason": "memory", "message": "the parser ran out of memory"}
    except RecursionError:
        return {"ok": False, "reason": "recursion", "message": "the document nests too deeply"}
    except Exception as exc:  # an unknown parser bug is classified, not propagated
        return {"ok": False, "reason": "malformed", "message": f"{type(exc).__name__}: {str(exc)[:200]}"}
