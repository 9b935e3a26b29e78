import pytest


@pytest.fixture(scope="session")
def learned_extractor():
    from kgr.stages.extract import Extractor, load_nlp

    return Extractor(nlp=load_nlp("en_core_web_sm"), relations="learned")


@pytest.fixture()
def analyse_learned(learned_extractor):
    """Relations of a Markdown text with the learned classifier (the model in use: see relmodel.using_model)."""
    from kgr.stages.textmodel import parse_document

    def run(text: str, rules_only: bool = False):
        doc = parse_document(text, path="new.md")
        spans = learned_extractor.mentions(doc)
        learned_extractor.learned = not rules_only
        try:
            return learned_extractor.relations(doc, spans)
        finally:
            learned_extractor.learned = True

    return run
