"""Extract + link throughput on the PowerShell corpus, and the share of time in spaCy.

    python bench/bench_graph.py [CORPUS_DIR] [--keep DB] [--relation-view] [--engine local|processes]

Loads the corpus without the graph, then builds the graph of every document and
reports chunks/s, with the time spent in spaCy's pipeline (the physical floor of this
design: every block of prose goes through tagger, parser and NER) against the rest.
``--engine`` is where the extract step runs, as `kgr ingest --engine` (default: processes, one
worker per core, as `kgr ingest` does); spaCy's time is counted only in this process, so
only ``--engine local`` reports it.

``--relation-view`` also times what reading each relation candidate's evidence with the
default embedding model (bench/relation_dense.py's ``mentions`` view) would add to the
build: for every candidate, and for only those the shipped relation model gives a relation
at least ``CASCADE`` (a cascade that reads the rest with the sparse model alone).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "powershell-docs"
CASCADE = 0.05


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(DEFAULT_CORPUS))
    ap.add_argument("--keep", help="keep the database at this path (for inspection)")
    ap.add_argument("--relation-view", action="store_true", help="also time the mentions view of the candidates")
    ap.add_argument("--engine", choices=["local", "processes"], default="processes")
    args = ap.parse_args()
    if args.relation_view:
        args.engine = "local"  # the candidates are collected in this process
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"skipped: corpus not found at {corpus} (needs ../shared)")
        return
    from kgr import config
    from kgr.ingest import engine as engines
    from kgr.ingest.graphbuild import build_pending
    from kgr.ingest.pipeline import ingest
    from kgr.stages import extract, relmodel
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
            # the candidates are kept only when asked for: the timed build is the same otherwise
            with relmodel.collecting() if args.relation_view else contextlib.nullcontext([]) as collected:
                runner = engines.make(args.engine)
                try:
                    docs = build_pending(store, config.load(None), engine=runner)
                finally:
                    runner.close()
                wall = time.perf_counter() - t
            counts = {k: store.scalar(f"SELECT count(*) FROM {k}") for k in ("entities", "mentions", "relations")}
    rest = wall - spent["spacy"]
    print(f"corpus          {corpus} ({docs} documents, {chunks} chunks), engine {args.engine}")
    print(f"model load      {load_s:.1f} s (spaCy import + en_core_web_sm)")
    print(f"extract + link  {wall:.1f} s -> {chunks / wall:.1f} chunks/s, {docs / wall:.1f} docs/s")
    print(
        f"in spaCy        {spent['spacy']:.1f} s ({100 * spent['spacy'] / wall:.0f}%), the rest {rest:.1f} s ({100 * rest / wall:.0f}%)"
    )
    print(f"graph           {counts}")
    if args.relation_view:
        relation_view(collected, wall)


def relation_view(collected: list, wall: float) -> None:
    from relation_dense import mention_vectors

    from kgr.stages.relmodel import default_model
    from kgr.stages.relview import evidence_of

    model = default_model()
    every, likely = [], []
    for _, text, cands in collected:
        probs = model.probabilities([c.features for c in cands]) if cands else []
        for c, row in zip(cands, probs):
            item = evidence_of(text, c)
            every.append(item)
            if row[1:].max() >= CASCADE:
                likely.append(item)
    quiet = lambda msg: None  # noqa: E731
    for what, items in (("every candidate", every), (f"candidates >= {CASCADE}", likely)):
        _, seconds, distinct = mention_vectors(items, quiet)
        print(
            f"mentions view   {what}: {len(items)} candidates, {distinct} distinct evidence texts, "
            f"{seconds:.1f} s (+{100 * seconds / wall:.0f}% of extract + link)"
        )


if __name__ == "__main__":
    main()
