"""`kgr extract --batch N`: documents read together give the very records of one at a time."""

from pathlib import Path

from kgr.stages.chunk import chunk
from kgr.stages.extract import Extractor, extract, extract_batched
from kgr.stages.normalize import normalize

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kb"


def test_batches_of_documents_give_the_records_of_one_document_at_a_time(nlp):
    recs = list(chunk(normalize([str(EXAMPLES)], root=str(EXAMPLES))))
    docs = sum(r["kind"] == "doc" for r in recs)
    assert docs >= 10
    extractor = Extractor(nlp=nlp, relations="learned")  # the shipped model, its dense view included
    one = list(extract(recs, extractor=extractor))
    assert any(r["kind"] == "relation" for r in one) and any(r["kind"] == "mention" for r in one)
    for batch in (1, 4, docs + 1):
        assert list(extract_batched(recs, extractor=extractor, batch=batch)) == one, batch


def test_a_batch_whose_shared_parse_fails_is_parsed_document_by_document(nlp, monkeypatch):
    """One text that spoils spaCy's shared stream costs its batch the shared parse, not its records:
    the others are parsed alone, and that one again by the extract stage itself."""
    recs = list(chunk(normalize([str(EXAMPLES)], root=str(EXAMPLES))))
    extractor = Extractor(nlp=nlp, relations="rules")
    one = list(extract(recs, extractor=extractor))
    bad = [r["path"] for r in recs if r["kind"] == "doc"][2]
    real = extractor.parse_many
    calls = []

    def parse_many(docs):
        calls.append(len(docs))
        if any(d.path == bad for d in docs):
            raise ValueError("spaCy refused this text")
        return real(docs)

    monkeypatch.setattr(extractor, "parse_many", parse_many)
    assert list(extract_batched(recs, extractor=extractor, batch=8)) == one
    assert calls[0] == 8 and calls.count(1) >= 8  # the shared parse failed, then each of its documents alone
