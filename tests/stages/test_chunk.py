"""kgr.chunk: library tests on plain dicts, with the real default tokenizer."""

from __future__ import annotations

import copy
import time

import orjson
import pytest

from kgr import config, records
from kgr.errors import ConfigError
from kgr.stages.chunk import chunk, chunk_doc, doc_kind, make_prelude, options_from_config
from kgr.stages.tokens import get_counter

COUNTER = get_counter()
MODEL_MAX = COUNTER.max_length  # 256


def make_doc(text: str, path: str = "notes/guide.md", title: str | None = "Guide", **extra) -> dict:
    doc = {"kind": "doc", "path": path, "text": text, "hash": records.text_hash(text)}
    if title is not None:
        doc["title"] = title
    doc.update(extra)
    return doc


def chunks_of(doc: dict, **options) -> list[dict]:
    out = chunk_doc(doc, **options)
    check_chunks(doc, out, budget=options.get("max_tokens", 256))
    return out


def check_chunks(doc: dict, chunks: list[dict], budget: int = 256) -> None:
    """The invariants every chunk of every document must hold."""
    text = doc["text"]
    counts = COUNTER.count_batch([c["text"] for c in chunks])
    prelude_counts = COUNTER.count_batch([c["prelude"] for c in chunks])
    for i, (c, n, pn) in enumerate(zip(chunks, counts, prelude_counts)):
        assert c["kind"] == "chunk" and c["doc"] == doc["path"] and c["ord"] == i
        assert text[c["start"] : c["end"]] == c["text"], (c["start"], c["end"])
        assert c["text"].strip(), "empty chunk"
        assert c["tokens"] == n, (i, c["tokens"], n)
        assert n <= budget
        assert pn + n + COUNTER.special_tokens <= MODEL_MAX, (pn, n)
        # what the embedder will read is within the model's input
        embedded = len(COUNTER.encode(c["prelude"] + "\n" + c["text"], add_special_tokens=True).ids)
        assert embedded <= MODEL_MAX
        assert c["hash"] == records.text_hash(c["prelude"] + "\n" + c["text"])
        assert c["chunk_kind"] in ("general", "faq", "definitions", "procedure")
        assert isinstance(c["headings"], list) and isinstance(c["section"], str)
    for a, b in zip(chunks, chunks[1:]):
        assert a["start"] < b["start"] and a["end"] < b["end"], "chunks go forward"


def sentences(n: int, topic: str = "widget") -> str:
    return " ".join(f"The {topic} number {i} is configured with option {i * 7} for the cluster." for i in range(n))


def paragraphs(n: int, per: int = 3, topic: str = "widget") -> str:
    return "\n\n".join(sentences(per, f"{topic}{k}") for k in range(n))


# --- records in, records out ---------------------------------------------------------------


def test_doc_first_then_its_chunks_and_other_kinds_pass_through_in_order():
    d1 = make_doc("# One\n\n" + paragraphs(2), path="a.md")
    d2 = make_doc("# Two\n\n" + paragraphs(2), path="b.md")
    other1 = {"kind": "entity", "key": "x", "name": "X", "type": "thing"}
    other2 = {"kind": "mystery", "payload": [1, 2]}
    err = records.error("normalize", "bad file", path="c.pdf")
    before = copy.deepcopy([other1, d1, other2, d2, err])
    out = list(chunk(iter([other1, d1, other2, d2, err])))
    kinds = [(r["kind"], r.get("doc") or r.get("path") or r.get("key")) for r in out]
    assert kinds[0] == ("entity", "x")
    assert out[1] is d1 and out[1] == before[1]
    i2 = next(i for i, r in enumerate(out) if r is other2)
    assert all(r["kind"] == "chunk" and r["doc"] == "a.md" for r in out[2:i2])
    assert out[i2 + 1] is d2 and out[i2 + 1] == before[3]
    assert out[-1] is err
    assert all(r["kind"] == "chunk" and r["doc"] == "b.md" for r in out[i2 + 2 : -1])
    assert [r for r in out if r["kind"] != "chunk"] == before  # nothing else changed


def test_streaming_does_not_read_ahead_more_than_a_batch():
    pulled = []

    def source():
        for i in range(100):
            pulled.append(i)
            yield make_doc(f"# Doc {i}\n\nText {i}.", path=f"{i}.md")

    stream = chunk(source(), batch_docs=4)
    first = next(stream)
    assert first["path"] == "0.md"
    assert len(pulled) <= 5
    one_by_one = chunk(source(), batch_docs=1)
    pulled.clear()
    next(one_by_one)
    assert pulled == [0]


def test_empty_text_gives_the_doc_and_no_chunks():
    for text in ("", "   \n\n  \t\n"):
        doc = make_doc(text)
        assert list(chunk([doc])) == [doc]


def test_bad_doc_record_becomes_an_error_record():
    bad = {"kind": "doc", "path": "x.md", "text": None, "hash": "h"}
    good = make_doc("Hello there.", path="y.md")
    out = list(chunk([bad, good]))
    assert out[0]["kind"] == "error" and out[0]["stage"] == "chunk" and out[0]["path"] == "x.md"
    assert out[0]["reason"] == "bad_record"
    assert out[1] is good and out[2]["kind"] == "chunk"


def test_too_many_chunks_is_an_error_instead_of_the_doc():
    text = "\n\n".join(f"## Part {i}\n\n" + paragraphs(2, topic=f"p{i}") for i in range(10))
    big = make_doc(text, path="big.md", size=1234, mtime_ms=5, file_hash="fh", format="md")
    small = make_doc("# Small\n\nJust one line.", path="small.md")
    out = list(chunk([big, small], max_chunks_per_doc=3))
    err = out[0]
    assert err["kind"] == "error" and err["stage"] == "chunk" and err["reason"] == "too_many_chunks"
    assert err["path"] == "big.md" and "3" in err["message"]
    # the loader needs the file's identity to remember it as failed
    assert (err["size"], err["mtime_ms"], err["file_hash"], err["format"]) == (1234, 5, "fh", "md")
    assert not any(r.get("doc") == "big.md" for r in out)
    assert out[1] is small and out[2]["doc"] == "small.md"


def test_deterministic():
    text = "# Title\n\n" + "\n\n".join(f"## S{i}\n\n" + paragraphs(3, topic=f"t{i}") for i in range(5))
    runs = [orjson.dumps(list(chunk([make_doc(text)]))) for _ in range(2)]
    assert runs[0] == runs[1]


# --- fields ---------------------------------------------------------------------------------


def test_fields_headings_section_and_prelude():
    text = "# Guide\n\nIntro text for the guide.\n\n## Install\n\n### Linux\n\n" + paragraphs(6) + "\n"
    out = chunks_of(make_doc(text, title="Guide"))
    last = out[-1]
    assert last["section"] == "Linux"
    assert last["headings"] == ["Guide", "Install", "Linux"]
    assert last["prelude"] == "notes/guide.md • Linux • Guide > Install"
    assert set(last) == {
        "kind",
        "doc",
        "ord",
        "text",
        "prelude",
        "section",
        "headings",
        "start",
        "end",
        "tokens",
        "hash",
        "chunk_kind",
    }


def test_prelude_does_not_repeat_parts():
    assert make_prelude("a.md", "Guide", ["Guide"]) == "a.md • Guide"
    assert make_prelude("a.md", "Guide", []) == "a.md • Guide"
    assert make_prelude("a.md", "C", ["A", "B", "C"]) == "a.md • C • A > B"
    assert make_prelude("a.md", "D", ["A", "B", "C", "D"]) == "a.md • D • B > C"
    assert make_prelude("a.md", "", ["", "B"]) == "a.md • B"
    assert make_prelude("a.md", "Guide", ["Guide", "Guide"]) == "a.md • Guide"  # H1 and H2 alike


def test_text_before_the_first_heading_is_named_by_the_doc_title():
    text = sentences(30) + "\n\n# Later\n\n" + sentences(30)
    out = chunks_of(make_doc(text, title="My Title"))
    assert out[0]["section"] == "My Title" and out[0]["headings"] == []
    assert out[-1]["section"] == "Later"


def test_headings_inside_code_fences_are_not_sections():
    text = (
        "# Scripts\n\n" + paragraphs(1) + "\n\n"
        "```powershell\n# This is a comment, not a heading\nGet-Process\n```\n\n"
        "~~~\n## also not a heading\n~~~\n\n"
        "After the code.\n"
    )
    out = chunks_of(make_doc(text))
    assert {c["section"] for c in out} == {"Scripts"}


def test_setext_headings_are_sections():
    text = "Overview\n========\n\n" + paragraphs(1) + "\n\nDetails\n-------\n\n" + paragraphs(1)
    out = chunks_of(make_doc(text, title="T"), max_tokens=64)
    assert {"Overview", "Details"} <= {c["section"] for c in out}


# --- budgets --------------------------------------------------------------------------------


def test_every_chunk_fits_the_model_with_its_prelude():
    long_path = "/".join(["a-rather-long-directory-name"] * 12) + "/file.md"
    headings = "\n\n".join(f"{'#' * (i + 1)} Heading level {i + 1} with quite a few words in it" for i in range(6))
    text = headings + "\n\n" + paragraphs(12)
    out = chunks_of(make_doc(text, path=long_path))
    assert len(out) > 3
    assert max(c["tokens"] for c in out) > 150  # a long prelude must not starve the text


def test_max_tokens_above_the_model_maximum_is_clamped():
    out = chunks_of(make_doc("# T\n\n" + paragraphs(20)), max_tokens=2048)
    assert max(c["tokens"] for c in out) <= COUNTER.text_limit


def test_smaller_max_tokens():
    out = chunks_of(make_doc("# T\n\n" + paragraphs(10)), max_tokens=64)
    assert max(c["tokens"] for c in out) <= 64
    assert max(c["tokens"] for c in out) > 40


def test_options_from_config_and_bad_options():
    cfg = config.load(None, env={})
    opts = options_from_config(cfg)
    assert opts["max_tokens"] == 256 and opts["overlap"] == 0.15 and opts["max_chunks_per_doc"] == 20000
    assert opts["budgets"] == {"general": 256, "faq": 160, "definitions": 160, "procedure": 256}
    assert opts["model"] == "all-MiniLM-L6-v2"
    out = list(chunk([make_doc("Hello world.")], **opts))
    assert out[1]["tokens"] == 3  # hello, world, .
    with pytest.raises(ConfigError, match="overlap"):
        list(chunk([], overlap=0.9))
    with pytest.raises(ConfigError, match="max_tokens"):
        list(chunk([], max_tokens=2))
    with pytest.raises(ConfigError, match="unknown kind"):
        list(chunk([], budgets={"poetry": 100}))


# --- structure ------------------------------------------------------------------------------


def _contains(chunk_: dict, start: int, end: int) -> bool:
    return chunk_["start"] <= start and end <= chunk_["end"]


def test_code_fence_is_not_split_when_it_fits():
    code = "```python\n" + "\n".join(f"value_{i} = compute(option={i}, retries=3)" for i in range(10)) + "\n```"
    assert 100 < COUNTER.count(code) < 200
    for lead in range(1, 6):  # wherever the fence falls relative to the budget
        text = "# Code\n\n" + paragraphs(lead) + "\n\n" + code + "\n\n" + paragraphs(3, topic="after")
        doc = make_doc(text)
        out = chunks_of(doc)
        start = text.index("```python")
        end = start + len(code)
        assert any(_contains(c, start, end) for c in out), lead
        for c in out:  # no chunk starts or ends inside the fence
            assert not (start < c["start"] < end) and not (start < c["end"] < end)


def test_list_items_are_not_cut():
    items = "\n".join(f"- Item {i}: the {i}th entry explains option {i} in a few words." for i in range(40))
    text = "# List\n\n" + items
    out = chunks_of(make_doc(text))
    assert len(out) > 1
    for line in items.split("\n"):
        s = text.index(line)
        assert any(_contains(c, s, s + len(line)) for c in out)
        for c in out:
            assert not (s < c["start"] < s + len(line)) and not (s < c["end"] < s + len(line))


def test_overlap_between_consecutive_chunks_of_a_section():
    text = "# Long\n\n" + paragraphs(30, per=2)
    out = chunks_of(make_doc(text))
    assert len(out) >= 3
    for a, b in zip(out, out[1:]):
        assert b["start"] < a["end"], "the next chunk starts with the tail of the previous one"
        shared = COUNTER.count(text[b["start"] : a["end"]])
        assert 0 < shared <= round(0.15 * 256)
        # cut at a block or sentence boundary
        before = text[: b["start"]].rstrip(" ")
        assert (
            before.endswith("\n")
            or before.endswith(".")
            or text[b["start"] - 1] == " "
            and text[: b["start"]].rstrip().endswith(".")
        )


def test_overlap_share_follows_the_option():
    text = "# Long\n\n" + paragraphs(15, per=2)
    none = chunks_of(make_doc(text), overlap=0)
    for a, b in zip(none, none[1:]):
        assert b["start"] >= a["end"]
    wide = chunks_of(make_doc(text), overlap=0.3)
    shared = [COUNTER.count(text[b["start"] : a["end"]]) for a, b in zip(wide, wide[1:])]
    assert max(shared) > round(0.15 * 256)


def test_no_overlap_across_sections():
    text = "# A\n\n" + paragraphs(8, topic="a") + "\n\n# B\n\n" + paragraphs(8, topic="b")
    out = chunks_of(make_doc(text))
    b_start = text.index("# B")
    first_b = next(c for c in out if c["section"] == "B")
    assert first_b["start"] == b_start
    assert all(c["end"] <= b_start for c in out if c["section"] == "A")


def test_long_paragraph_is_cut_at_sentences():
    text = "# P\n\n" + sentences(60)
    out = chunks_of(make_doc(text))
    assert len(out) > 2
    for c in out:
        assert c["text"].endswith(".")


def test_tiny_sections_are_merged_under_the_same_parent():
    text = (
        "# Ref\n\n"
        + paragraphs(4)
        + "\n\n## A\n\nShort a.\n\n## B\n\nShort b.\n\n## C\n\nShort c.\n\n# Other\n\nShort other."
    )
    out = chunks_of(make_doc(text, title="Ref"))
    assert [c["section"] for c in out] == ["Ref", "A", "Other"]
    merged = out[1]
    assert "Short a." in merged["text"] and "Short b." in merged["text"] and "Short c." in merged["text"]
    assert merged["section"] == "A" and merged["headings"] == ["Ref", "A"]
    assert out[-1]["section"] == "Other" and "Short c." not in out[-1]["text"]


def test_big_sections_are_not_merged():
    text = "## A\n\n" + paragraphs(3, topic="a") + "\n\n## B\n\n" + paragraphs(3, topic="b")
    out = chunks_of(make_doc(text))
    assert [c["section"] for c in out] == ["A", "B"]


# --- document kinds -------------------------------------------------------------------------


def test_procedure_keeps_its_step_list_together():
    steps = "\n".join(
        f"{i}. Run the installer step {i} and confirm that the service named svc{i} starts." for i in range(1, 8)
    )
    assert COUNTER.count(steps) < 200
    for lead in range(1, 5):
        text = "# How to install the agent\n\n" + paragraphs(lead, per=2) + "\n\n" + steps + "\n\n" + paragraphs(2)
        doc = make_doc(text, title="How to install the agent")
        out = chunks_of(doc)
        assert {c["chunk_kind"] for c in out} == {"procedure"}
        s = text.index("1. Run")
        e = s + len(steps)
        assert any(_contains(c, s, e) for c in out), f"step list split with {lead} paragraphs before it"


def test_procedure_longer_than_a_chunk_is_split_between_steps():
    steps = [f"{i}. " + sentences(2, topic=f"step{i}") for i in range(1, 16)]
    text = "# Runbook: restore the database\n\n" + "\n".join(steps)
    out = chunks_of(make_doc(text, path="ops/runbooks/restore.md", title="Restore the database"))
    assert len(out) > 2
    assert {c["chunk_kind"] for c in out} == {"procedure"}
    for step in steps:
        s = text.index(step)
        e = s + len(step)
        assert any(_contains(c, s, e) for c in out)
        for c in out:  # a chunk may begin with the tail of the previous step (overlap) but never ends in one
            assert not (s < c["end"] < e)


def test_numbered_steps_make_a_procedure():
    text = "# Setting up\n\n" + "\n".join(f"{i}. Do thing {i}." for i in range(1, 6)) + "\n\nDone.\n"
    assert doc_kind("setup.md", "Setting up", text) == "procedure"
    text = "# Setup\n\nStep 1: unpack.\n\nStep 2: configure.\n\nStep 3: start.\n"
    assert doc_kind("setup.md", "Setup", text) == "procedure"


def test_faq_budget_is_smaller():
    qa = "\n\n".join(f"## How do I configure option {i}?\n\n" + paragraphs(4, per=3, topic=f"q{i}") for i in range(4))
    faq = chunks_of(make_doc("# Questions\n\n" + qa, path="docs/help.md", title="Questions"))
    assert {c["chunk_kind"] for c in faq} == {"faq"}
    assert max(c["tokens"] for c in faq) <= 160
    same_text_general = chunks_of(make_doc("# Notes\n\n" + qa.replace("?", "."), path="docs/notes.md", title="Notes"))
    assert {c["chunk_kind"] for c in same_text_general} == {"general"}
    assert max(c["tokens"] for c in same_text_general) > 160
    assert doc_kind("support/FAQ.md", "Support", "Some text.") == "faq"


def test_definitions_budget_is_smaller():
    terms = "\n".join(f"- **Term{i}**: " + sentences(2, topic=f"term{i}") for i in range(12))
    out = chunks_of(make_doc("# Words\n\n" + terms, path="docs/words.md", title="Words"))
    assert {c["chunk_kind"] for c in out} == {"definitions"}
    assert max(c["tokens"] for c in out) <= 160
    assert doc_kind("docs/glossary.md", "Glossary", "Some text.") == "definitions"
    dashes = "\n".join(f"Widget{i} — a part that does thing {i}." for i in range(8))
    assert doc_kind("docs/parts.md", "Parts", dashes) == "definitions"


def test_general_document():
    assert doc_kind("docs/intro.md", "Introduction", "# Introduction\n\n" + paragraphs(3)) == "general"


def test_budgets_option_overrides_kinds():
    qa = "\n\n".join(f"## Why {i}?\n\n" + paragraphs(2, topic=f"q{i}") for i in range(3))
    out = chunks_of(make_doc(qa, path="faq.md"), budgets={"faq": 64})
    assert max(c["tokens"] for c in out) <= 64


# --- hard cases -----------------------------------------------------------------------------


def _timed(text: str, **options) -> tuple[float, list[dict]]:
    doc = make_doc(text, path="giant.txt", title="Giant")
    t0 = time.perf_counter()
    out = chunk_doc(doc, **options)
    return time.perf_counter() - t0, out


def test_giant_line_without_spaces_is_hard_split_in_linear_time():
    small_t, small = _timed("x" * 1_000_000)
    big_t, big = _timed("y" * 5_000_000)
    text = "y" * 5_000_000
    assert len(big) > 100
    assert "".join(c["text"] for c in big) == text  # nothing lost, nothing repeated
    for c in big[:20] + big[-20:]:
        assert text[c["start"] : c["end"]] == c["text"]
    check_chunks(make_doc(text, path="giant.txt", title="Giant"), big[:50])
    assert max(c["end"] - c["start"] for c in big) <= 256 * 16
    assert big_t < 120  # generous: a loaded 2-core machine took 55 s; the ratio below is the real check
    assert big_t < 12 * max(small_t, 0.05), (small_t, big_t)  # linear, not quadratic (25x)


def test_giant_line_of_words_is_split_between_words():
    text = " ".join(f"w{i % 977}x" for i in range(200_000))  # about 1.2 MB, one line, no sentences
    elapsed, out = _timed(text)
    doc = make_doc(text, path="giant.txt", title="Giant")
    check_chunks(doc, out)
    for c in out:
        assert not c["text"].startswith(" ") and not c["text"].endswith(" ")
        assert c["start"] == 0 or text[c["start"] - 1] == " "
    assert elapsed < 30


def test_long_words_with_a_tiny_budget_are_cut_inside_the_word():
    # 17 word pieces each, over a budget of 8; a word over 100 characters is one [UNK]
    words = " ".join(["pneumonoultramicroscopicsilicovolcanoconiosis"] * 5 + ["supercalifragilistic" * 6] * 3)
    doc = make_doc("# W\n\n" + words)
    out = chunk_doc(doc, max_tokens=8)
    check_chunks(doc, out, budget=8)
    assert "pneumonoultramicros" in [c["text"] for c in out]


def test_unicode_offsets_are_exact():
    text = (
        "# Ünïcödé 🎉\n\n"
        "Emoji: 👩‍👩‍👧‍👦 family, 👍🏽 thumbs, flags 🇫🇷🇯🇵. Combining: e\u0301 a\u0308 n\u0303.\n\n"
        "## 中文部分\n\n" + "这是一个很长的中文段落，没有空格。" * 60 + "\n\n"
        "## Mixed\n\n"
        + ("Zalgo z\u0351\u0352\u0353o\u0354\u0355 and café naïve résumé. " * 40)
        + "\n\n"
        + "🙂" * 3000
        + "\n\n"
        + "e\u0301" * 5000
        + "\n"
    )
    doc = make_doc(text, title="Ünïcödé")
    out = chunks_of(doc)
    assert any(c["section"] == "中文部分" for c in out)
    for c in out:
        if c["start"] > 0:
            assert text[c["start"]] not in "\u0301\u0308\u0303\u0351\u200d", "a chunk starts with a combining mark"


def test_crlf_and_tabs():
    text = "# Title\r\n\r\n" + "\r\n".join(sentences(1, topic=f"line{i}") for i in range(60)) + "\r\n\t- item\r\n"
    chunks_of(make_doc(text))


# --- a tokenizer whose counts do not add up (SentencePiece-like, as EmbeddingGemma's) --------


@pytest.fixture(scope="module")
def metaspace_model(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator([paragraphs(20), "# How to\n\n1. Step one.\n- item `code`"] * 3, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    directory = tmp_path_factory.mktemp("metaspace-model")
    tok.save(str(directory / "tokenizer.json"))
    (directory / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    return directory


def test_other_tokenizers_are_counted_on_the_final_text(metaspace_model):
    counter = get_counter(str(metaspace_model))
    assert not counter.additive and counter.max_length == 128 and counter.special_tokens == 2
    text = (
        "# Guide\n\n"
        + paragraphs(6)
        + "\n\n## Steps\n\n"
        + "\n".join(f"{i}. Step {i} runs." for i in range(1, 9))
        + "\n\n"
        + "q" * 20000
        + "\n\n"
        + "中文字符" * 300
        + "\n"
    )
    doc = make_doc(text)
    out = chunk_doc(doc, model=str(metaspace_model), max_tokens=256)
    assert len(out) > 5
    counts = counter.count_batch([c["text"] for c in out])
    preludes = counter.count_batch([c["prelude"] for c in out])
    for c, n, pn in zip(out, counts, preludes):
        assert text[c["start"] : c["end"]] == c["text"]
        assert c["tokens"] == n
        assert n + pn + 2 <= 128
        assert len(counter.encode(c["prelude"] + "\n" + c["text"], add_special_tokens=True).ids) <= 128
