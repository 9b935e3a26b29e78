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


def test_lemmas_made_when_read_are_the_lemmatizers():
    from kgr.stages.textmodel import lemma

    nlp = load_nlp("en_core_web_sm")
    assert "lemmatizer" not in nlp.pipe_names  # deferred: made for the tokens that are read
    text = "The gateways were rebuilt by two teams, and Tova's services are running better than before."
    lazy, eager = nlp(text), nlp.get_pipe("lemmatizer")(nlp(text))
    assert [lemma(t) for t in lazy] == [t.lemma_ for t in eager]
    assert lemma(lazy[1]) == "gateway" and lemma(lazy[2]) == "be" and lemma(lazy[3]) == "rebuild"
