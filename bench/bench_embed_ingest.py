"""Ingest throughput with embedding, against pure model time for the same texts.

    python bench/bench_embed_ingest.py [--passages 1000]

Writes N passages of ../shared/eval/hotpotqa_dev200/corpus.json as Markdown files, then in
one process, side by side:

- ingest without the graph (normalize, chunk, load, embed), wall time, with and without
  sentence vectors (``embed.sentences``);
- ingest with the graph (plus extract and link), wall time;
- pure model time: the embedding model alone on exactly the texts ingest embedded (chunk
  prelude + text, each sentence after its title, and entity names), all in one call, model
  already loaded;
- spaCy alone on the same chunk texts (the graph's own model floor).

The embedding model is the physical limit of the no-graph ingest; embedding + spaCy is the
limit with the graph. Ratios above 1 are overhead.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "eval" / "hotpotqa_dev200" / "corpus.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=1000)
    args = ap.parse_args()
    if not CORPUS.exists():
        print(f"skipped: {CORPUS} not found (needs ../shared)")
        return
    from kgr import config
    from kgr.embedders import get_embedder
    from kgr.ingest.pipeline import ingest
    from kgr.stages.extract import load_nlp
    from kgr.store import Store, vectors

    cfg = config.load(None)
    passages = json.loads(CORPUS.read_text())[: args.passages]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "kb"
        folder.mkdir()
        for i, p in enumerate(passages):
            (folder / f"p{i:05d}.md").write_text(f"# {p['title']}\n\n{p['text']}\n")
        emb = get_embedder(cfg, purpose="document")
        emb.embed_documents(["warm up"])  # load the model before timing anything
        load_nlp(cfg["extract"]["ner"])
        walls = {}
        for graph, sentences in ((False, False), (False, True), (True, True)):
            db = Path(tmp) / f"g{int(graph)}s{int(sentences)}.sqlite"
            run_cfg = config.load(None, overrides={"embed.sentences": sentences})
            t = time.perf_counter()
            with Store(db) as store:
                summary = ingest([str(folder)], store, config=run_cfg, graph=graph, embed=True)
            walls[graph, sentences] = time.perf_counter() - t
            assert summary.ingested == len(passages)
        with Store(Path(tmp) / "g1s1.sqlite", readonly=True) as store:
            chunk_texts = [
                vectors.chunk_text(p, t) for p, t in store.query("SELECT prelude, text FROM chunks ORDER BY id")
            ]
            sentence_texts = [
                s
                for title, text in store.query(
                    "SELECT d.title, c.text FROM chunks c JOIN docs d ON d.id = c.doc_id ORDER BY c.id"
                )
                for s in vectors.sentence_texts(title, text)
            ]
            entity_texts = [
                vectors.entity_text(n, ty, a, d)
                for n, ty, a, d in store.query(
                    "SELECT name, type, aliases, description FROM entities WHERE status != 'merged'"
                )
            ]
        # the model at its best: every text in one call, so that it sorts them by length
        # and pads least (ingest hands it 256 texts at a time)
        t = time.perf_counter()
        emb.embed_documents(chunk_texts)
        model_chunks = time.perf_counter() - t
        t = time.perf_counter()
        emb.embed_documents(sentence_texts)
        model_sentences = time.perf_counter() - t
        t = time.perf_counter()
        emb.embed_documents(entity_texts)
        model_entities = time.perf_counter() - t
        nlp = load_nlp(cfg["extract"]["ner"])
        t = time.perf_counter()
        list(nlp.pipe([c.split("\n", 1)[-1] for c in chunk_texts], batch_size=64))
        spacy_s = time.perf_counter() - t
    n = len(passages)
    print(f"{n} passages, {len(chunk_texts)} chunks, {len(sentence_texts)} sentences, {len(entity_texts)} entities")
    wall = walls[False, False]
    print(
        f"ingest, no graph, no sentences: {wall:.1f} s = {n / wall:.1f} passages/s; "
        f"model alone on its chunks {model_chunks:.1f} s -> {wall / model_chunks:.2f}x"
    )
    wall, floor = walls[False, True], model_chunks + model_sentences
    print(
        f"ingest, no graph:   {wall:.1f} s = {n / wall:.1f} passages/s; "
        f"model alone on its chunks and sentences {floor:.1f} s -> {wall / floor:.2f}x"
    )
    wall, floor = walls[True, True], model_chunks + model_sentences + model_entities
    print(
        f"ingest, with graph: {wall:.1f} s = {n / wall:.1f} passages/s; "
        f"models alone (embedding {floor:.1f} s + spaCy {spacy_s:.1f} s) "
        f"-> {wall / (floor + spacy_s):.2f}x; against the embedding model only {wall / floor:.2f}x"
    )


if __name__ == "__main__":
    main()
