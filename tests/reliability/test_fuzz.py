"""RELIABILITY.md P7: fuzz every parser (Markdown, text, front matter, HTML, PDF, DOCX) and
every stage's record reader (chunk, extract, link, embed, load read JSON Lines) with
Hypothesis-generated and -mutated inputs; see fuzzing.py for the targets and the property.

The property, for every input: the outcome is a valid document or record stream, or a
typed, classified failure (ParseFailure / KgrError / an ``error`` record); never another
exception, never longer than the time limit.

The default run is short and derandomized (the same examples on every run, so CI does not
flake); KGR_SLOW=1 adds the soak: >= 100,000 cases through bench/fuzz_soak.py.
Inputs that once crashed are kept in fuzz_regressions/ and replayed on every run.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import fuzzing
import pytest
from hypothesis import HealthCheck, Phase, given, settings

HERE = Path(__file__).resolve().parent
REGRESSIONS = HERE / "fuzz_regressions"
LIMIT_S = 20  # CPU seconds per case (wall: 10x); generous: a typical case takes milliseconds
SHORT = {
    "markdown": 30,
    "text": 30,
    "front_matter": 40,
    "html": 30,
    "pdf": 25,
    "docx": 25,
    "docx_xml": 20,
    "reader_records": 40,
    "chunk_records": 25,
    "extract_records": 25,
    "link_records": 25,
    "embed_records": 25,
    "load_records": 20,
}


def fuzz(target: fuzzing.Target, strategy, examples: int) -> None:
    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def check(data: bytes) -> None:
        out = fuzzing.run_case(target, data, LIMIT_S)
        assert out.kind not in ("crash", "hang"), f"{target.name}: {out.kind}: {out.detail}"

    check()


@pytest.mark.parametrize("name", sorted(SHORT))
def test_p7_fuzz_short(name):
    target = fuzzing.targets()[name]
    fuzz(target, target.strategy(), SHORT[name])


def test_p7_fuzz_markdown_mutations_of_the_powershell_corpus(shared):
    target = fuzzing.targets(str(shared))["markdown"]
    assert len(fuzzing.seeds("md", str(shared))) > len(fuzzing.seeds("md"))
    fuzz(target, fuzzing.mutated(fuzzing.seeds("md", str(shared))[-8:], "md"), 30)


def test_every_parser_and_stage_has_a_target():
    names = set(fuzzing.targets())
    assert {"markdown", "text", "front_matter", "html", "pdf", "docx"} <= names
    assert {f"{s}_records" for s in ("reader", "chunk", "extract", "link", "embed", "load")} <= names
    assert set(SHORT) == names


def test_the_harness_can_fail():
    """A target that raises, and one that hangs, are reported as such (not as passes)."""
    boom = fuzzing.Target("boom", lambda data: data.decode("ascii") and ("ok", ""), lambda: None)
    assert fuzzing.run_case(boom, b"\xff", 5).kind == "crash"

    def spin(data):
        while True:
            pass

    out = fuzzing.run_case(fuzzing.Target("spin", spin, lambda: None), b"", 0.2)
    assert out.kind == "hang" and "CPU" in out.detail and out.seconds < 30

    def sleep(data):
        import time

        time.sleep(30)

    out = fuzzing.run_case(fuzzing.Target("sleep", sleep, lambda: None), b"", 5, 0.2)
    assert out.kind == "hang" and "wall" in out.detail and out.seconds < 5


# -- regressions: crashes the fuzzer found, each fixed ---------------------------------------------------------


def _replays():
    return sorted(REGRESSIONS.glob("*.bin")) if REGRESSIONS.is_dir() else []


@pytest.mark.parametrize("path", _replays(), ids=lambda p: p.stem)
def test_p7_saved_crashers_stay_fixed(path):
    target = fuzzing.targets()[path.stem.split("-")[0]]
    out = fuzzing.run_case(target, path.read_bytes(), LIMIT_S)
    assert out.kind not in ("crash", "hang"), out.detail


def test_front_matter_integer_beyond_64_bits_is_kept_as_text():
    kind, _ = fuzzing.targets()["front_matter"].fn(b"---\ntitle: T\nbig: -1180591620717411303423\n---\nBody.\n")
    assert kind == "ok"
    doc = fuzzing._check_doc("---\nbig: 18446744073709551616\nsmall: 3\n---\nBody.\n", {}, "md")
    assert doc["meta"]["front_matter"] == {"big": "18446744073709551616", "small": 3}


@pytest.mark.parametrize(
    "front",
    [
        b"when: 2025-03-01T50:00:00Z\n",  # PyYAML: ValueError "hour must be in 0..23"
        b'title: "\\U0011ffff"\n',  # PyYAML: ValueError "chr() arg not in range(0x110000)"
        b"tags: &a\n- x\n- *a\n",  # a list that contains itself: RecursionError in _jsonable
    ],
    ids=["bad-date", "bad-escape", "self-alias"],
)
def test_front_matter_yaml_cannot_build_is_dropped_not_a_crash(front):
    doc = fuzzing._check_doc(("---\n" + front.decode() + "---\n# Heading\n\nBody.\n"), {}, "md")
    assert "front_matter" not in doc["meta"] and doc["text"].startswith("# Heading") and doc["title"] == "Heading"


def test_docx_whose_member_does_not_read_back_is_malformed(tmp_path):
    good = fuzzing.seeds("docx")[0]
    with zipfile.ZipFile(io.BytesIO(good)) as z:
        offset = z.getinfo("word/document.xml").header_offset
    broken = bytearray(good)
    broken[offset : offset + 4] = b"PK\x00\x00"  # "Bad magic number for file header", found while streaming
    path = tmp_path / "broken.docx"
    path.write_bytes(bytes(broken))
    assert fuzzing.child_outcome("docx", str(path)) == ("classified", "malformed")


@pytest.mark.parametrize(
    "xml",
    [
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"/>',  # no body
        b'<w:documentx xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body/></w:documentx>',
    ],
    ids=["no-body", "other-root"],
)
def test_docx_main_part_without_a_body_is_malformed(xml):
    assert fuzzing._docx_xml_target(xml) == ("classified", "malformed")


WRONG_TYPES = [
    b'{"kind": "doc", "path": "a.md", "text": "x", "hash": []}\n',
    b'{"kind": "doc", "path": "a.md", "text": 5, "hash": "h"}\n',
    b'{"kind": "chunk", "doc": "a.md", "ord": "0", "text": "t"}\n',
    b'{"kind": "chunk", "doc": "a.md", "ord": 0, "text": "t", "prelude": ["p"]}\n',
    b'{"kind": "mention", "chunk": "a.md#0", "surface": ["x"], "type": "ORG"}\n',
    b'{"kind": "entity", "key": "k", "name": "N", "type": "ORG", "aliases": 1}\n',
    b'{"kind": "entity", "key": "k", "name": "N", "type": "ORG", "aliases": [{"a": 1}]}\n',
    b'{"kind": "relation", "src": "a", "dst": 1, "rel": "uses"}\n',
    b'{"kind": "error", "stage": "x", "message": null}\n',
]


@pytest.mark.parametrize("stage", ["reader", "chunk", "extract", "link", "embed", "load"])
@pytest.mark.parametrize("line", WRONG_TYPES, ids=range(len(WRONG_TYPES)))
def test_a_field_of_the_wrong_type_is_an_error_record_in_every_stage(stage, line):
    doc = b'{"kind": "doc", "path": "a.md", "text": "# A\\n\\nSome text.", "hash": "h"}\n'
    out = fuzzing._stage(stage, doc + line)
    if stage == "load":
        assert "1 errors" in out[0]["line"]
    else:
        errors = [r for r in out if r["kind"] == "error"]
        assert len(errors) == 1 and errors[0]["line"] == 2 and "must be" in errors[0]["message"]


@pytest.mark.slow
@pytest.mark.timeout(6 * 3600)
def test_p7_soak_100k_cases(tmp_path):
    script = HERE.parents[1] / "bench" / "fuzz_soak.py"
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1])}
    proc = subprocess.run(
        [sys.executable, str(script), "--cases", "100000", "--out", str(tmp_path / "crashers")],
        capture_output=True,
        text=True,
        env=env,
    )
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_p7_mutated_files_through_the_parser_children_end_as_docs_or_classified_errors(tmp_path):
    """The whole path (spawned child, RLIMITs, timeout) on a derandomized batch of mutated files:
    every file gives one doc or one error record with a known reason."""
    from kgr.stages.normalize import NormalizeOptions, normalize

    root = tmp_path / "kb"
    root.mkdir()
    n = 0
    for fmt, nest in (("html", "html"), ("pdf", "pdf"), ("docx", "xml"), ("md", "md")):
        made: list[bytes] = []

        @settings(
            max_examples=8,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(fuzzing.mutated(fuzzing.seeds(fmt), nest))
        def collect(data):
            made.append(data)

        collect()
        for data in made:
            (root / f"case{n:03}.{fmt}").write_bytes(data)
            n += 1
    options = NormalizeOptions(redact_key=b"k", workers=1, parse_timeout_s=60)
    out = list(normalize([str(root)], root=str(root), options=options))
    assert len(out) == n
    for rec in out:
        assert rec["kind"] == "doc" or rec.get("reason") in fuzzing.KNOWN_REASONS, rec
    assert not [r for r in out if r.get("reason") in ("crash", "timeout")]
