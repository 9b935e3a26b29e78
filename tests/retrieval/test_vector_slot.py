"""Graph mode keeps the page the question's vector finds nearest among the first results: a
question that paraphrases its other half shares few words with the page that answers it, and
keyword look-alikes and the pages links place would otherwise push that page out of sight."""

import sys
from pathlib import Path

from kgr.retrieval import query
from kgr.retrieval.query import hybrid_query
from kgr.stages.load import load
from kgr.store import Store, vectors

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from test_placement import _graph, _records  # noqa: E402
from test_vectors import CountingFake  # noqa: E402

QUESTION = "What kind of plane dropped the bomb on the harbour town?"
CLAIM = "A training plane dropped a dummy bomb of some kind near the harbour town."
ANSWER = ("heron.md", "Silver Heron", "The Silver Heron carried the device across the bay in the summer of that year.")
# look-alikes: the question's words, none of its meaning
LOOKALIKES = [f"Drill {i}: a training plane dropped a dummy bomb of kind {i} near the town." for i in range(8)]
FILLER = [f"The lunch menu {i} lists soup and bread." for i in range(20)]


def _kb(path: Path):
    store = Store(path)
    load(_records("harbour.md", "Harbour Town", "Harbour Town is a fishing port on the bay."), store)
    load(_records(ANSWER[0], ANSWER[1], ANSWER[2]), store)
    for i, text in enumerate(LOOKALIKES):
        load(_records(f"drill{i}.md", f"Drill {i}", text), store)
    for i, text in enumerate(FILLER):
        load(_records(f"lunch{i}.md", f"Lunch {i}", text), store)
    _graph(store, {1: "Harbour Town"}, {"harbour.md": 1}, {("drill0.md", 1): 1.0})
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    # the question's vector is nearest the answer's page: what a real model does for a paraphrase,
    # and what a bag-of-words fake cannot
    answer_chunk = f"# {ANSWER[1]}\n\n{ANSWER[2]}"
    return store, (lambda text: fake._vec(answer_chunk))


def _pages(store, embed, q: str) -> list[dict]:
    return hybrid_query(store, q, k=40, mode="graph", embed_query=embed)["results"]


def test_the_vectors_nearest_page_is_among_the_first_five(tmp_path, monkeypatch):
    store, embed = _kb(tmp_path / "kb.sqlite")
    monkeypatch.setattr(query, "VECTOR_SLOT", 0)
    before = [r["path"] for r in _pages(store, embed, QUESTION)]
    assert before.index(ANSWER[0]) >= 5  # the look-alikes' words outrank it

    monkeypatch.setattr(query, "VECTOR_SLOT", 5)
    results = _pages(store, embed, QUESTION)
    after = [r["path"] for r in results]
    assert after.index(ANSWER[0]) == 4
    assert results[4]["scores"]["vector_rank"] == 1
    assert "semantic match #1, kept among the first 5" in results[4]["why"]
    # it takes the fifth place; the page that held it moves down one, the first four keep theirs
    assert after[:4] == before[:4]
    assert after[5] == before[4]
    assert sorted(after) == sorted(before)  # nothing lost, nothing added


def test_a_claim_keeps_its_ranking(tmp_path, monkeypatch):
    store, embed = _kb(tmp_path / "kb.sqlite")
    monkeypatch.setattr(query, "VECTOR_SLOT", 0)
    before = [r["path"] for r in _pages(store, embed, CLAIM)]
    assert before.index(ANSWER[0]) >= 5
    monkeypatch.setattr(query, "VECTOR_SLOT", 5)
    assert [r["path"] for r in _pages(store, embed, CLAIM)] == before


def test_a_page_already_among_the_first_stays_where_it_is(tmp_path, monkeypatch):
    store, embed = _kb(tmp_path / "kb.sqlite")
    monkeypatch.setattr(query, "VECTOR_SLOT", 0)
    before = [r["path"] for r in _pages(store, embed, QUESTION)]
    at = before.index(ANSWER[0])
    assert at > 0
    monkeypatch.setattr(query, "VECTOR_SLOT", at + 1)
    assert [r["path"] for r in _pages(store, embed, QUESTION)] == before
