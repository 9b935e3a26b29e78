"""The entity-type trainer's bookkeeping: examples are entities, and an entity belongs to one corpus."""

from __future__ import annotations

from kgr.eval import typetrain


def mention(corpus: str, entity: int, gold_type: str, surface: str) -> typetrain.Mention:
    raw = (surface, None, "ner", {}, ["^", "the", "runs", "$"])
    return typetrain.Mention("a.md", entity, raw, gold=f"{corpus}-E{entity}", gold_type=gold_type, corpus=corpus)


def test_same_entity_id_in_two_corpora_is_two_examples():
    # entity ids are each scratch database's own: id 1 of one corpus is not id 1 of another
    ms = [mention("one", 1, "PERSON", "Ada Byron"), mention("two", 1, "SERVICE", "Ledgerline")]
    exs = typetrain.examples(ms)
    assert sorted((key, label) for _, label, _, key in exs) == [(("one", 1), "PERSON"), (("two", 1), "SERVICE")]


def test_accuracy_reads_predictions_by_corpus_and_entity():
    ms = [mention("one", 1, "PERSON", "Ada Byron"), mention("two", 1, "SERVICE", "Ledgerline")]
    right, total, by_type = typetrain.accuracy({("one", 1): "PERSON", ("two", 1): "PERSON"}, ms)
    assert (right, total) == (1, 2)
    assert by_type == {"PERSON": [1, 1], "SERVICE": [0, 1]}


def test_a_corpus_type_outside_kgrs_is_no_label(tmp_path):
    (tmp_path / "entities.jsonl").write_text(
        '{"id": "E1", "name": "Ada Byron", "type": "PERSON"}\n'
        '{"id": "E2", "name": "FIBT World Championships", "type": "MISC"}\n'
        '{"id": "E3", "name": "Mediaș", "type": "LOCATION"}\n'
    )
    assert typetrain.labels(tmp_path) == {"E1": "PERSON", "E3": "LOCATION"}
