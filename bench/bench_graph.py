"""Extract + link throughput on the PowerShell corpus, and the share of time in spaCy.

    python bench/bench_graph.py [CORPUS_DIR] [--limit N]

Loads the corpus without the graph, then builds the graph of every document and
reports chunks/s, with the time spent in spaCy's pipeline (the physical floor of this
design: every block of prose goes through tagger, parser and NER) against the rest.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "powershell-docs"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(DEFAULT_CORPUS))
    ap.add_argument("--keep", help="keep the database at this path (for inspection)")
    args = ap.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"skipped: corpus not found at {corpus} (needs ../shared)")
        return
    from kgr import config
    from kgr.ingest.graphbuild import build_pending
    from kgr.ingest.pipeline import ingest
    from kgr.stages import extract
    from kgr.store import Store

    spent = {"spacy": 0.0}
    original = extract.Extractor.pipe  # every spaCy parse goes through it, lazily: time each doc it yields

    def timed(self, texts):
        parsed = original(self, texts)
        while True:
            t = time.perf_counter()
            try:
                doc = next(parsed)
            except StopIteration:
                return
            finally:
                spent["spacy"] += time.perf_counter() - t
            yield doc

    extract.Extractor.pipe = timed
    with tempfile.TemporaryDirectory() as tmp:
        with Store(args.keep or Path(tmp) / "g.sqlite") as store:
            ingest([str(corpus)], store, config=config.load(None), graph=False, embed=False)
            chunks = store.scalar("SELECT count(*) FROM chunks")
            t = time.perf_counter()
            extract.load_nlp("en_core_web_sm")
            load_s = time.perf_counter() - t
            t = time.perf_counter()
            docs = build_pending(store, config.load(None))
            wall = time.perf_counter() - t
            counts = {k: store.scalar(f"SELECT count(*) FROM {k}") for k in ("entities", "mentions", "relations")}
    rest = wall - spent["spacy"]
    print(f"corpus          {corpus} ({docs} documents, {chunks} chunks)")
    print(f"model load      {load_s:.1f} s (spaCy import + en_core_web_sm)")
    print(f"extract + link  {wall:.1f} s -> {chunks / wall:.1f} chunks/s, {docs / wall:.1f} docs/s")
    print(
        f"in spaCy        {spent['spacy']:.1f} s ({100 * spent['spacy'] / wall:.0f}%), the rest {rest:.1f} s ({100 * rest / wall:.0f}%)"
    )
    print(f"graph           {counts}")


if __name__ == "__main__":
    main()
