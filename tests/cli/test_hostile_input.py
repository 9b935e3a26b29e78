"""Issue 14, hostile and unusual input: symlink loops (item 2), partial documents
(item 9) and doc paths that load must refuse (item 10).

CliRunner tests assert stdout records, stderr lines and exit codes separately.
"""

from __future__ import annotations

import os

import orjson
import pytest
from click.testing import CliRunner

from kgr.cli import cli


@pytest.fixture()
def runner():
    return CliRunner()


def records(output: bytes | str) -> list[dict]:
    data = output.encode() if isinstance(output, str) else output
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


# -- item 2: symlink loops -------------------------------------------------------------


@pytest.fixture()
def looped(tmp_path):
    """t/ holds a.md, b.md and the loop x.md -> y.md -> x.md."""
    root = tmp_path / "t"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nThe first file.\n")
    (root / "b.md").write_text("# B\n\nThe second file.\n")
    os.symlink("y.md", root / "x.md")
    os.symlink("x.md", root / "y.md")
    return root


def test_symlink_loop_is_an_error_record_per_entry_and_other_files_are_normalized(runner, looped):
    result = runner.invoke(cli, ["normalize", str(looped)])
    assert "Traceback" not in result.stderr and not isinstance(result.exception, RuntimeError)
    assert result.exit_code == 1
    out = records(result.stdout_bytes)
    assert [(r["kind"], r["path"]) for r in out] == [
        ("doc", "a.md"),
        ("doc", "b.md"),
        ("error", "x.md"),
        ("error", "y.md"),
    ]
    errors = [r for r in out if r["kind"] == "error"]
    assert {r["reason"] for r in errors} == {"symlink_loop"}
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and all("symlink loop" in ln and "[symlink_loop]" in ln for ln in lines)
    assert any("x.md" in ln for ln in lines) and any("y.md" in ln for ln in lines)


def test_symlink_loop_named_on_the_command_line_is_an_error_record(runner, looped):
    result = runner.invoke(cli, ["normalize", "--root", str(looped), str(looped / "x.md"), str(looped / "a.md")])
    assert "Traceback" not in result.stderr and not isinstance(result.exception, RuntimeError)
    assert result.exit_code == 1
    out = records(result.stdout_bytes)
    assert [r["kind"] for r in out] == ["error", "doc"]
    assert out[0]["reason"] == "symlink_loop" and out[1]["path"] == "a.md"


def test_ingest_stores_the_other_files_despite_a_symlink_loop(runner, looped, tmp_path):
    db = tmp_path / "kb.sqlite"
    result = runner.invoke(cli, ["ingest", str(looped), "--db", str(db), "--no-embed", "--no-graph"])
    assert "Traceback" not in result.stderr and not isinstance(result.exception, RuntimeError)
    assert "symlink_loop" in result.stderr
    from kgr.store import Store

    with Store(db, readonly=True) as store:
        assert sorted(p for (p,) in store.query("SELECT path FROM docs")) == ["a.md", "b.md"]


# -- item 10: doc paths that load refuses --------------------------------------------------


def _doc(path, text="Some text about the Widget service.", **kw):
    from kgr.records import text_hash

    return {
        "kind": "doc",
        "path": path,
        "source": "file",
        "text": text,
        "hash": text_hash(text),
        "title": "t",
        "mtime_ms": 1,
        "size": len(text),
        "meta": {},
        **kw,
    }


def _chunk(path, text="Some text about the Widget service."):
    return {"kind": "chunk", "doc": path, "ord": 0, "text": text, "prelude": path, "start": 0, "end": len(text)}


BAD_PATHS = ["/etc/evil.md", "../up.md", "sub/../../up.md", "a\x00b.md", "./dot.md", "sub//x.md", "", "sub/"]


def test_load_refuses_doc_records_with_bad_paths_naming_the_line_and_loads_the_rest(runner, tmp_path):
    lines = [_doc("a.md"), _chunk("a.md")]
    for p in BAD_PATHS:
        lines += [_doc(p), _chunk(p)]
    lines += [_doc("b.md"), _chunk("b.md")]
    data = b"".join(orjson.dumps(r) + b"\n" for r in lines)
    db = tmp_path / "kb.sqlite"
    result = runner.invoke(cli, ["load", "--db", str(db)], input=data)
    assert result.exit_code == 1
    bad_lines = [3 + 2 * i for i in range(len(BAD_PATHS))]
    errors = [ln for ln in result.stderr.splitlines() if "[bad_path]" in ln]
    assert len(errors) == len(BAD_PATHS), result.stderr
    for ln, n in zip(errors, bad_lines):
        assert f"line {n}: " in ln and 'doc record\'s "path"' in ln
        assert "\x00" not in ln  # the NUL is shown escaped, the line stays one line
    assert "is absolute" in errors[0] and "'..'" in errors[1] and "NUL" in errors[3]
    from kgr.store import Store

    with Store(db, readonly=True) as store:
        assert store.query("SELECT path FROM docs ORDER BY path") == [("a.md",), ("b.md",)]
        assert store.scalar("SELECT count(*) FROM chunks") == 2


def test_load_library_refuses_a_bad_path_and_does_not_give_its_records_to_the_previous_doc(tmp_path):
    from kgr.stages.load import load
    from kgr.store import Store

    mention = {
        "kind": "mention",
        "chunk": "/etc/evil.md#0",
        "surface": "Widget",
        "type": "PRODUCT",
        "start": 0,
        "end": 6,
    }
    with Store(tmp_path / "kb.sqlite") as store:
        summary = load([_doc("a.md"), _chunk("a.md"), _doc("/etc/evil.md"), _chunk("/etc/evil.md"), mention], store)
        assert store.query("SELECT path, graph_sig FROM docs") == [("a.md", None)]  # the mention did not go to a.md
        assert summary.written == 1 and summary.errors == 3 and summary.orphans == 2


def test_chunk_stage_refuses_the_same_paths_with_line_numbers(runner):
    data = orjson.dumps(_doc("/abs.md")) + b"\n" + orjson.dumps(_doc("ok.md")) + b"\n"
    result = runner.invoke(cli, ["chunk"], input=data)
    assert result.exit_code == 1
    out = records(result.stdout_bytes)
    assert out[0]["kind"] == "error" and out[0]["line"] == 1 and out[0]["reason"] == "bad_path"
    assert [r["path"] for r in out if r["kind"] == "doc"] == ["ok.md"]
    assert "line 1: " in result.stderr and "is absolute" in result.stderr


# -- item 9: partial documents are loud ----------------------------------------------------

INVALID = b"# Caf\xe9 notes\n\nThe caf\xe9 \xff\xfe serves the Widget team every morning.\n"  # 4 invalid sequences: two \xe9, \xff, \xfe


@pytest.fixture()
def partial_kb(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "big.md").write_text(
        "# Big\n\n" + "".join(f"Line {i} of the long file about widgets.\n" for i in range(100))
    )
    (root / "latin1.md").write_bytes(INVALID)
    (root / "fine.md").write_text("# Fine\n\nA literal \ufffd replacement character written on purpose.\n")
    cfg = tmp_path / "kgr.yaml"
    cfg.write_text("normalize:\n  max_chars: 1000\n")
    return root, cfg


def test_decode_counts_each_invalid_sequence_and_not_a_literal_replacement_character():
    from kgr.stages.parsers import decode_text_counted

    assert decode_text_counted(INVALID) == (INVALID.decode("utf-8", "replace"), 4)
    assert decode_text_counted("ok \ufffd".encode()) == ("ok \ufffd", 0)
    assert decode_text_counted(b"\xff\xfe" + "h\u00e9".encode("utf-16-le") + b"\x00\xd8") == ("h\u00e9\ufffd", 1)


def test_truncated_and_misdecoded_documents_are_marked_partial_and_warned_about(runner, partial_kb):
    root, cfg = partial_kb
    result = runner.invoke(cli, ["normalize", str(root), "--config", str(cfg)])
    assert result.exit_code == 0, result.stderr  # a warning is not an error record
    docs = {d["path"]: d for d in records(result.stdout_bytes)}
    assert set(docs) == {"big.md", "fine.md", "latin1.md"} and all(d["kind"] == "doc" for d in docs.values())
    big = docs["big.md"]
    assert len(big["text"]) == 1000 and big["meta"]["truncated"] is True
    [trunc] = big["meta"]["partial"]
    assert trunc["reason"] == "truncated" and trunc["kept_chars"] == 1000 and trunc["total_chars"] > 1000
    [bad] = docs["latin1.md"]["meta"]["partial"]
    assert bad["reason"] == "invalid_encoding" and bad["count"] == 4 and bad["encoding"] == "UTF-8"
    assert "caf\ufffd" in docs["latin1.md"]["text"]  # the document is kept
    assert "partial" not in docs["fine.md"]["meta"]
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    big_line = next(ln for ln in lines if "big.md" in ln)
    assert "partial" in big_line and f"kept the first 1000 of {trunc['total_chars']} characters" in big_line
    bad_line = next(ln for ln in lines if "latin1.md" in ln)
    assert "partial" in bad_line and "4 invalid UTF-8 byte sequences replaced" in bad_line


def test_ingest_warns_and_status_reports_partial_documents(runner, partial_kb, tmp_path):
    root, cfg = partial_kb
    db = tmp_path / "kb.sqlite"
    result = runner.invoke(
        cli, ["ingest", str(root), "--db", str(db), "--config", str(cfg), "--no-graph", "--no-embed"]
    )
    assert result.exit_code == 0, result.stderr
    assert any("big.md" in ln and "partial" in ln for ln in result.stderr.splitlines())
    assert any("latin1.md" in ln and "partial" in ln for ln in result.stderr.splitlines())
    assert "2 partial" in result.stderr  # the summary line
    js = runner.invoke(cli, ["status", "--db", str(db), "--json"])
    assert js.exit_code == 0, js.stderr
    info = orjson.loads(js.stdout)
    part = info["partial_docs"]
    assert part["count"] == 2 and [d["path"] for d in part["docs"]] == ["big.md", "latin1.md"]
    assert "4 invalid UTF-8 byte sequences replaced" in part["docs"][1]["reasons"][0]
    text = runner.invoke(cli, ["status", "--db", str(db)])
    assert text.exit_code == 0
    assert "partial    2 documents" in text.stdout
    assert "big.md: kept the first 1000 of" in text.stdout and "latin1.md: 4 invalid UTF-8" in text.stdout


def test_status_lists_a_bounded_sample_of_partial_documents(tmp_path):
    from kgr.retrieval import status as status_mod
    from kgr.stages.load import load
    from kgr.store import Store

    partial = [
        {"reason": "truncated", "kept_chars": 10, "total_chars": 20, "message": "kept the first 10 of 20 characters"}
    ]
    with Store(tmp_path / "kb.sqlite") as store:
        load(
            [_doc(f"p{i:02}.md", f"text {i}", meta={"partial": partial}) for i in range(25)] + [_doc("whole.md")], store
        )
        info = status_mod.status(store)
        assert info["partial_docs"]["count"] == 25 and len(info["partial_docs"]["docs"]) == status_mod.PARTIAL_SAMPLE
        import io

        out = io.StringIO()
        status_mod.print_status(info, out)
        assert f"and {25 - status_mod.PARTIAL_SAMPLE} more" in out.getvalue()
        # neither query scans every document's text
        plan = " ".join(str(r) for r in store.query("EXPLAIN QUERY PLAN " + status_mod.PARTIAL_QUERY, (10,)))
        assert "idx_docs_partial" in plan, plan
        count_sql = f"SELECT count(*) FROM docs WHERE {status_mod.PARTIAL_WHERE}"
        plan = " ".join(str(r) for r in store.query("EXPLAIN QUERY PLAN " + count_sql))
        assert "idx_docs_partial" in plan, plan


def test_invalid_utf8_in_html_is_counted_too(runner, tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "page.html").write_bytes(
        b"<html><head><meta charset='utf-8'><title>Caf\xc3\xa9</title></head>"
        b"<body><main><h1>Menu</h1><p>The caf\xe9 serves \xff tea to the Widget team.</p></main></body></html>"
    )
    result = runner.invoke(cli, ["normalize", str(root)])
    assert result.exit_code == 0, result.stderr
    [doc] = records(result.stdout_bytes)
    assert "\ufffd" in doc["text"]
    [bad] = doc["meta"]["partial"]
    assert bad["reason"] == "invalid_encoding" and bad["count"] == 2
    assert "page.html: partial document: 2 invalid UTF-8 byte sequences replaced" in result.stderr


def test_a_file_name_load_would_refuse_is_an_error_at_discovery_not_a_silent_failure(runner, tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "c:notes.md").write_text("# C\n\nReads as a drive letter.\n")  # absolute on Windows: confine refuses it
    (root / "d.md").write_text("# D\n\nFine.\n")
    db = tmp_path / "kb.sqlite"
    result = runner.invoke(cli, ["ingest", str(root), "--db", str(db), "--no-graph", "--no-embed"])
    assert result.exit_code == 1
    assert "c:notes.md: the path is absolute, so it cannot be stored [bad_filename]" in result.stderr
    assert "1 failed" in result.stderr  # the file, not also its orphaned chunk
    from kgr.store import Store

    with Store(db, readonly=True) as store:
        assert store.query("SELECT path FROM docs") == [("d.md",)]


def test_a_folder_that_cannot_be_listed_is_an_error_record_unless_ignored(tmp_path, monkeypatch):
    from kgr.stages.normalize import FileRef, discover

    root = tmp_path / "kb"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "secret.md").write_text("x")
    (root / "a.md").write_text("# A\n")
    real_scandir = os.scandir

    def scandir(path):  # as for a folder of another user (the tests may run as root, where chmod 000 reads anyway)
        if os.fspath(path) == str(root / "locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = list(discover([str(root)], root=str(root)))
    assert [f.rel_path for f in found if isinstance(f, FileRef)] == ["a.md"]
    [err] = [f for f in found if isinstance(f, dict)]
    assert err["reason"] == "unreadable" and err["path"] == "locked/"
    assert "cannot list the folder: Permission denied" in err["message"] and ".kgrignore" in err["message"]
    (root / ".kgrignore").write_text("locked/\n")
    assert [f.rel_path for f in discover([str(root)], root=str(root))] == ["a.md"]


def test_a_nul_past_the_binary_sniff_and_an_empty_file_are_said_not_silent(runner, tmp_path):
    # a NUL after the first 8,000 bytes was removed without a word, and an empty file was
    # stored as an ordinary document of no chunks: both are now warnings (exit 0) and partial
    root = tmp_path / "kb"
    root.mkdir()
    body = "A plain paragraph of notes about the service and its owners.\n\n" * 250
    (root / "nul.md").write_text(body[:12000] + "\x00" + body[12000:], encoding="utf-8")
    (root / "empty.md").write_bytes(b"")
    (root / "blank.md").write_text("---\ntitle: Only front matter\n---\n\n   \n", encoding="utf-8")
    (root / "fine.md").write_text("# Fine\n\nNothing odd here.\n", encoding="utf-8")
    result = runner.invoke(cli, ["normalize", str(root)])
    assert result.exit_code == 0, result.stderr
    docs = {d["path"]: d for d in records(result.stdout_bytes)}
    assert set(docs) == {"nul.md", "empty.md", "blank.md", "fine.md"}
    [nul] = docs["nul.md"]["meta"]["partial"]
    assert nul["reason"] == "nul_removed" and nul["count"] == 1 and "\x00" not in docs["nul.md"]["text"]
    assert [p["reason"] for p in docs["empty.md"]["meta"]["partial"]] == ["empty"]
    assert [p["reason"] for p in docs["blank.md"]["meta"]["partial"]] == ["empty"]
    assert "partial" not in docs["fine.md"]["meta"]
    lines = result.stderr.splitlines()
    assert len(lines) == 3, result.stderr
    assert any("nul.md" in ln and "1 NUL character removed" in ln for ln in lines)
    assert any("empty.md" in ln and "no text to index" in ln for ln in lines)
