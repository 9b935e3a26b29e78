import pytest


@pytest.fixture(scope="session")
def nlp():
    from kgr.stages.extract import load_nlp

    return load_nlp("en_core_web_sm")


@pytest.fixture(scope="session")
def extractor(nlp):
    from kgr.stages.extract import Extractor

    return Extractor(nlp=nlp, relations="rules")  # the rules alone: what test_extract checks


@pytest.fixture()
def analyse(extractor):
    """Run mention and relation extraction on a Markdown text; return (spans, relations)."""
    from kgr.stages.textmodel import parse_document

    def run(text: str, title: str | None = None):
        doc = parse_document(text, title=title)
        spans = extractor.mentions(doc)
        return spans, extractor.relations(doc, spans)

    return run
