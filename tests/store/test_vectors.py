"""Vector storage plumbing: vec0 tables, the cache, model checks, clean-up with chunks.

The embedder here is a counting bag-of-words fake (plumbing only); meaning is tested with
the real model in tests/retrieval/.
"""

import hashlib

import numpy as np
import pytest

from kgr.errors import BadRecord, ModelMismatch
from kgr.stages import embed
from kgr.stages.load import load
from kgr.store import Store, vectors


class CountingFake:
    model, dim, max_tokens = "fake-bow", 32, 256

    def __init__(self):
        self.calls = 0
        self.texts = 0

    def _vec(self, text):
        v = np.zeros(self.dim, dtype=np.float32)
        for w in text.lower().split():
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1
        return v / (np.linalg.norm(v) or 1)

    def embed_documents(self, texts):
        self.calls += 1
        self.texts += len(texts)
        return np.stack([self._vec(t) for t in texts])

    embed_queries = embed_documents


def records(path, texts):
    yield {
        "kind": "doc",
        "path": path,
        "hash": hashlib.sha256("".join(texts).encode()).hexdigest(),
        "title": path,
        "text": " ".join(texts),
    }
    for i, t in enumerate(texts):
        yield {
            "kind": "chunk",
            "doc": path,
            "ord": i,
            "text": t,
            "prelude": path,
            "hash": str(i),
            "start": 0,
            "end": len(t),
        }


@pytest.fixture()
def store(tmp_path):
    with Store(tmp_path / "v.sqlite") as s:
        yield s


def test_embed_pending_stores_vectors_and_loads_no_model_when_nothing_is_pending(store):
    load(records("a.md", ["kestrel event bus", "ledger service owns money"]), store)
    fake = CountingFake()
    made = []
    counts = vectors.embed_pending(store, lambda: made.append(1) or fake)
    assert counts["chunks"] == 2 and counts["embedded"] == 2
    assert vectors.counts(store)["chunk_vectors"] == 2
    assert vectors.embed_pending(store, lambda: made.append(1) or fake)["chunks"] == 0
    assert len(made) == 1  # the second run did not even construct the embedder
    hits = vectors.knn(store, vectors.CHUNK, fake._vec("a.md\nkestrel event bus"), 2)
    assert hits[0][1] > 0.95 and hits[0][1] > hits[1][1]


def test_replaced_chunks_drop_their_vectors_and_the_cache_spares_the_model(store):
    load(records("a.md", ["kestrel event bus", "ledger service owns money"]), store)
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    # the file changes: one chunk kept, one new
    load(records("a.md", ["kestrel event bus", "settlement engine pays"]), store)
    assert vectors.counts(store)["chunk_vectors"] == 0  # the old rows and their vectors are gone
    fake.texts = 0
    counts = vectors.embed_pending(store, lambda: fake)
    assert counts["chunks"] == 2 and counts["cached"] == 1
    assert fake.texts == 1 + 2  # one chunk text (the other is cached) and both chunks' sentences (never cached)
    assert store.scalar("SELECT count(*) FROM chunk_vec") == 2


def test_another_model_is_a_clear_error(store):
    load(records("a.md", ["kestrel event bus"]), store)
    vectors.embed_pending(store, lambda: CountingFake())
    other = vectors.VectorSpec("other-model", 64)
    with pytest.raises(ModelMismatch, match="fake-bow"):
        vectors.check_spec(store, other)
    vectors.drop_all(store)
    vectors.ensure_tables(store, other)
    assert vectors.stored_spec(store) == vectors.VectorSpec("other-model", 64, 8)


def test_entity_vectors_follow_changes_of_name_and_aliases(store):
    load(records("a.md", ["kestrel event bus"]), store)
    with store.write() as conn:
        conn.execute(
            "INSERT INTO entities(key, name, type, norm, aliases) VALUES ('SERVICE:kestrel', 'Kestrel', 'SERVICE', 'kestrel', '[]')"
        )
    fake = CountingFake()
    assert vectors.embed_pending(store, lambda: fake)["entities"] == 1
    assert vectors.embed_pending(store, lambda: fake)["entities"] == 0
    with store.write() as conn:
        conn.execute("""UPDATE entities SET aliases='["the bus"]' WHERE key='SERVICE:kestrel'""")
    assert vectors.embed_pending(store, lambda: fake)["entities"] == 1
    with store.write() as conn:
        conn.execute("DELETE FROM entities")
    assert store.scalar("SELECT count(*) FROM entity_vec") == 0


def test_float32_on_request(store):
    load(records("a.md", ["kestrel event bus"]), store)
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake, quantize=32)
    assert vectors.stored_spec(store).quantize == 32
    sims = vectors.similarities(store, vectors.CHUNK, fake._vec("a.md\nkestrel event bus"), [1])
    assert sims[1] == pytest.approx(1.0, abs=1e-5)


def test_in_memory_search_equals_the_scan_and_sees_changes(store):
    load(records("a.md", ["kestrel event bus", "ledger service owns money", "settlement engine pays"]), store)
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    q = fake._vec("a.md\nledger money")
    scan = vectors.knn(store, vectors.CHUNK, q, 3)
    mem = vectors.knn(store, vectors.CHUNK, q, 3, in_memory=True)
    assert [i for i, _ in scan] == [i for i, _ in mem]
    assert all(abs(a - b) < 1e-5 for (_, a), (_, b) in zip(scan, mem))
    load(records("a.md", ["ledger money ledger money"]), store)  # replaced: old vectors gone
    vectors.embed_pending(store, lambda: fake)
    mem = vectors.knn(store, vectors.CHUNK, q, 3, in_memory=True)
    assert len(mem) == 1 and mem == vectors.knn(store, vectors.CHUNK, q, 3)


def test_in_memory_similarities_equal_the_stored_ones(store):
    load(records("a.md", ["kestrel event bus", "ledger service owns money", "settlement engine pays"]), store)
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    q = fake._vec("ledger money")
    ids = [1, 3, 99]
    a = vectors.similarities(store, vectors.CHUNK, q, ids)
    b = vectors.similarities(store, vectors.CHUNK, q, ids, in_memory=True)
    assert a.keys() == b.keys() == {1, 3}
    assert all(abs(a[i] - b[i]) < 1e-5 for i in a)


def test_an_in_memory_reader_sees_another_connection_delete_a_vector(store, tmp_path):
    load(records("a.md", ["kestrel event bus"]), store)
    load(records("b.md", ["ledger service owns money"]), store)
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    q = fake._vec("a.md\nkestrel event bus")
    with Store(store.path, readonly=True) as reader:
        assert len(vectors.knn(reader, vectors.CHUNK, q, 5, in_memory=True)) == 2
        with store.write() as conn:  # the older, lower-numbered vector goes; the highest id stays
            conn.execute("DELETE FROM docs WHERE path = 'a.md'")
        got = vectors.knn(reader, vectors.CHUNK, q, 5, in_memory=True)
        assert len(got) == 1 and got == vectors.knn(reader, vectors.CHUNK, q, 5)


def test_sentence_vectors_follow_their_chunks(store):
    load(
        records(
            "a.md", ["Kestrel is the event bus. Core Infrastructure owns it.\n- short", "ledger service owns money"]
        ),
        store,
    )
    fake = CountingFake()
    counts = vectors.embed_pending(store, lambda: fake)
    # each sentence or line of 16 characters or more, after the document's title ("a.md" here)
    assert vectors.sentence_texts("a.md", "Kestrel is the event bus. Core Infrastructure owns it.\n- short") == [
        "a.md: Kestrel is the event bus.",
        "a.md: Core Infrastructure owns it.",
    ]
    # a table's rows count, its separator line does not
    assert vectors.sentence_texts(None, "| Service | Owner |\n| --- | --- | --- |\n| Kestrel | CoreInfra |") == [
        "| Service | Owner |",
        "| Kestrel | CoreInfra |",
    ]
    assert counts["sentences"] == 3 and counts["embedded"] == 2
    blobs = dict(store.query("SELECT chunk_id, length(vectors) FROM sentence_vec"))
    assert sorted(blobs.values()) == [32, 64]  # one int8 row of 32 dimensions per sentence
    assert vectors.embed_pending(store, lambda: fake)["sentences"] == 0  # nothing pending the second time
    load(records("a.md", ["settlement engine pays"]), store)  # the file changes: its chunks are replaced
    assert store.scalar("SELECT count(*) FROM sentence_vec") == 0
    assert vectors.embed_pending(store, lambda: fake)["sentences"] == 1
    vectors.drop_all(store)  # kgr embed --pending --reembed
    assert not vectors.has_sentence_table(store)


def test_a_chunk_scores_by_its_nearest_sentence(store):
    load(records("a.md", ["Kestrel is the event bus. Core Infrastructure owns it. Ledger pays money."]), store)
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    cid = store.scalar("SELECT id FROM chunks")
    q = fake._vec("a.md: Core Infrastructure owns it.")
    best = vectors.sentence_similarities(store, q, [cid, cid + 1])
    assert list(best) == [cid]  # a chunk with no sentence vectors is left out
    assert best[cid] > 0.99  # quantised to int8: not exactly 1
    assert best[cid] > vectors.similarities(store, vectors.CHUNK, q, [cid])[cid] + 0.2


@pytest.mark.parametrize(
    "value, why",
    [("AQID", "sentence_vectors of 3 bytes are no rows of 4 dimensions"), ("!!", "bad sentence_vectors")],
)
def test_load_refuses_sentence_vectors_that_are_no_rows(store, value, why):
    recs = list(records("a.md", ["Kestrel is the event bus of the company."]))
    recs[1].update(embedding=embed.encode(np.ones(4)), model="m", dim=4, sentence_vectors=value)
    with pytest.raises(BadRecord, match=why):
        load(recs, store)


def test_load_keeps_the_sentence_vectors_kgr_embed_gives(store):
    recs = list(
        embed.embed(records("a.md", ["Kestrel is the event bus. Core Infrastructure owns it."]), CountingFake())
    )
    assert "sentence_vectors" in recs[1]
    load(recs, store)
    cid = store.scalar("SELECT id FROM chunks")
    best = vectors.sentence_similarities(store, CountingFake()._vec("a.md: Core Infrastructure owns it."), [cid])
    assert best[cid] > 0.99


def test_embed_sentences_false_embeds_no_sentences(store):
    load(records("a.md", ["Kestrel is the event bus. Core Infrastructure owns it."]), store)
    fake = CountingFake()
    counts = vectors.embed_pending(store, lambda: fake, sentences=False)
    assert counts["chunks"] == 1 and counts["sentences"] == 0 and fake.texts == 1
    recs = list(embed.embed(records("a.md", ["Kestrel is the event bus."]), fake, sentences=False))
    assert "embedding" in recs[1] and "sentence_vectors" not in recs[1]
