"""The packaged spaCy model is the official en_core_web_sm 3.8.0 (same pipeline and labels)."""

from kgr.stages.extract import load_nlp

# From the official en_core_web_sm 3.8.0 meta.json.
OFFICIAL_NER_LABELS = {
    "CARDINAL",
    "DATE",
    "EVENT",
    "FAC",
    "GPE",
    "LANGUAGE",
    "LAW",
    "LOC",
    "MONEY",
    "NORP",
    "ORDINAL",
    "ORG",
    "PERCENT",
    "PERSON",
    "PRODUCT",
    "QUANTITY",
    "TIME",
    "WORK_OF_ART",
}


def test_packaged_model_matches_the_official_meta():
    nlp = load_nlp("en_core_web_sm")
    meta = nlp.meta
    assert meta["version"] == "3.8.0" and meta["lang"] == "en"
    assert set(nlp.get_pipe("ner").labels) == OFFICIAL_NER_LABELS
    assert {"tok2vec", "tagger", "parser", "attribute_ruler", "ner"} <= set(nlp.pipe_names)
    doc = nlp("Kadri lives in Tallinn and joined Nokia in March 2021.")
    assert {e.label_ for e in doc.ents} >= {"GPE", "DATE"}
