"""Query latency: `kgr query` cold wall time, and warm p50/p95 per mode.

    python bench/bench_query.py [--db DB ...] [--synthetic 100000] [--no-sentences] [--runs 50]

- cold: a fresh `kgr query` process on the examples database (built on the fly), median
  of 5 runs; the floor is a fresh Python that only imports onnxruntime and embeds.
- warm: in one process, each mode over the same questions; p50/p95 in ms. --db adds a
  real database (the PowerShell corpus after `kgr ingest`); --synthetic builds a database
  of N chunks of random English-like text with random unit vectors (the model is not
  needed to measure search; the query is embedded for real) and a knowledge graph of
  N / 5 entities named by the text's words, their mentions, pages and relations, so that
  graph mode walks a graph (--no-graph: none, and graph mode is hybrid), and six random sentence
  vectors per chunk, by which retrieval scores its candidates (--no-sentences: none).

The physical limit of a warm hybrid query is the query embedding (ONNX, about 5 ms) plus
one brute-force int8 scan of the vectors; both are printed beside the totals.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MENTIONS_PER_CHUNK = 4  # synthetic graph: entities each chunk mentions
RELATIONS_PER_ENTITY = 3  # synthetic graph: relations per entity
SENTENCES_PER_CHUNK = 6  # synthetic database: sentence vectors per chunk (the golden corpora have 5.5)
QUESTIONS = [
    "how do I copy files to a remote computer",
    "what does the Verbose parameter do",
    "list the running services",
    "convert an object to JSON",
    "who owns the fare engine",
    "remove an item from the registry",
    "schedule a job to run every night",
    "what is a PowerShell module",
    "compare two files",
    "stop a process by name",
]


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def cold(examples_db: Path, runs: int = 5) -> None:
    walls = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "kgr", "query", "who approves fare changes", "--db", str(examples_db), "--k", "5"],
            check=True,
            capture_output=True,
        )
        walls.append(time.perf_counter() - t)
    floor = []
    code = (
        "import kgr.config as c; from kgr.embedders import get_embedder; "
        "get_embedder(c.load(None), purpose='query').embed_queries(['who approves fare changes'])"
    )
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        floor.append(time.perf_counter() - t)
    print(
        f"cold `kgr query` on examples: median {statistics.median(walls):.2f} s wall "
        f"(runs {', '.join(f'{w:.2f}' for w in walls)}); floor (python + onnxruntime + one embedding) "
        f"{statistics.median(floor):.2f} s -> {statistics.median(walls) / statistics.median(floor):.2f}x"
    )


def warm(db: Path, label: str, runs: int) -> None:
    from kgr import config
    from kgr.embedders import get_embedder
    from kgr.retrieval.query import hybrid_query
    from kgr.store import Store, vectors

    cfg = config.load(None)
    emb = get_embedder(cfg, purpose="query")
    with Store(db, readonly=True) as store:
        n = store.scalar("SELECT count(*) FROM chunks")
        qs = [QUESTIONS[i % len(QUESTIONS)] for i in range(runs)]
        for q in qs[:3]:
            hybrid_query(store, q, mode="graph", embed_query=lambda t: emb.embed_queries([t])[0])
        t_embed = []
        for q in qs:
            t = time.perf_counter()
            v = emb.embed_queries([q])[0]
            t_embed.append(1000 * (time.perf_counter() - t))
        t_knn = []
        for _ in qs:
            t = time.perf_counter()
            vectors.knn(store, vectors.CHUNK, v, 50)
            t_knn.append(1000 * (time.perf_counter() - t))
        vectors.knn(store, vectors.CHUNK, v, 50, in_memory=True)  # load the matrix once
        t_mem = []
        for _ in qs:
            t = time.perf_counter()
            vectors.knn(store, vectors.CHUNK, v, 50, in_memory=True)
            t_mem.append(1000 * (time.perf_counter() - t))
        print(
            f"\n{label}: {n} chunks, {runs} questions; query embedding p50 {pct(t_embed, 50):.1f} ms, "
            f"int8 vec0 scan p50 {pct(t_knn, 50):.1f} ms, in-memory matrix p50 {pct(t_mem, 50):.1f} ms"
        )
        print(f"{'mode':<8}{'scan p50':>10}{'scan p95':>10}{'memory p50':>12}{'memory p95':>12}   (ms)")
        for mode in ("bm25", "vector", "hybrid", "graph"):
            cols = []
            for mem in (False, True):
                times = []
                for q in qs:
                    t = time.perf_counter()
                    hybrid_query(
                        store,
                        q,
                        k=10,
                        mode=mode,
                        embed_query=lambda text: emb.embed_queries([text])[0],
                        vectors_in_memory=mem,
                    )
                    times.append(1000 * (time.perf_counter() - t))
                cols += [pct(times, 50), pct(times, 95)]
            print(f"{mode:<8}{cols[0]:>10.1f}{cols[1]:>10.1f}{cols[2]:>12.1f}{cols[3]:>12.1f}")


def synthetic(path: Path, n: int, *, graph: bool = True, sentences: bool = True) -> None:
    """N chunks of random words in documents of 20 chunks, with random unit vectors. With ``graph``
    (the default), a knowledge graph as an ingest leaves one, so that graph mode walks it rather than
    falling back to hybrid: n / 5 entities named by the vocabulary's words (so the questions name
    some), each chunk mentioning MENTIONS_PER_CHUNK of them where its text writes them, every document
    the page of the entity its title names, RELATIONS_PER_ENTITY random relations per entity of the
    walked types, and entity vectors. With ``sentences`` (the default), SENTENCES_PER_CHUNK sentence
    vectors per chunk, which retrieval scores its candidates by."""
    import numpy as np

    from kgr.store import Store, dumps, vectors

    rng = random.Random(7)
    words = [w.strip() for w in (REPO / "README.md").read_text().lower().split() if w.isalpha()]
    words = sorted(set(words)) + [f"term{i}" for i in range(3000)]
    vecs = np.random.default_rng(7).standard_normal((n, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    spec = vectors.VectorSpec("all-MiniLM-L6-v2", 384, 8)
    docs = max(1, n // 20)
    n_ent = max(2, n // 5) if graph else 0
    # the vocabulary's words as names, then the same words with a number (names are unique)
    names = [words[i % len(words)].capitalize() + (f" X{i}" if i >= len(words) else "") for i in range(n_ent)]
    with Store(path) as store:
        vectors.ensure_tables(store, spec)
        with store.write() as conn:
            subject = {d: rng.randrange(n_ent) for d in range(docs)} if n_ent else {}
            title_of = {d: names[subject[d]] if n_ent else f"Doc {d}" for d in range(docs)}
            conn.executemany(
                "INSERT INTO docs(id, path, hash, title, text) VALUES (?, ?, ?, ?, '')",
                [(d + 1, f"syn/{d}.md", str(d), title_of[d]) for d in range(docs)],
            )
            rows, mentions = [], []
            for i in range(n):
                doc = i // 20
                said = [rng.randrange(n_ent) for _ in range(MENTIONS_PER_CHUNK)] if n_ent else []
                parts = [rng.choice(words) for _ in range(120 - len(said))]
                for e in said:
                    parts.insert(rng.randrange(len(parts) + 1), names[e])
                if i % 20 == 0:  # a document's first chunk opens with its title
                    parts.insert(0, title_of[doc])
                text = " ".join(parts)
                rows.append((i + 1, doc + 1, i % 20, text, f"syn/{doc}.md • {title_of[doc]}", str(i)))
                if n_ent:
                    at = 0
                    positions = {}
                    for p in parts:
                        positions.setdefault(p, at)
                        at += len(p) + 1
                    if i % 20 == 0:  # the title's entity: the document is its page
                        e = subject[doc]
                        mentions.append((e + 1, doc + 1, i + 1, 0, len(names[e]), names[e], 1.0, '{"in_title": true}'))
                    for e in said:
                        start = positions[names[e]]
                        mentions.append((e + 1, doc + 1, i + 1, start, start + len(names[e]), names[e], 0.9, "{}"))
            conn.executemany("INSERT INTO chunks(id, doc_id, ord, text, prelude, hash) VALUES (?, ?, ?, ?, ?, ?)", rows)
            if n_ent:
                conn.executemany(
                    "INSERT INTO entities(id, key, name, type, norm, aliases) VALUES (?, ?, ?, 'SERVICE', ?, ?)",
                    [
                        (e + 1, f"SERVICE:{names[e].lower()}", names[e], names[e].lower(), dumps([]))
                        for e in range(n_ent)
                    ],
                )
                conn.executemany(
                    'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, source, link_score, features) '
                    "VALUES (?, ?, ?, ?, ?, ?, 'ner', ?, ?)",
                    mentions,
                )
                rels = ["uses", "depends_on", "part_of", "owned_by", "defines"]
                conn.executemany(
                    "INSERT OR IGNORE INTO relations(src_id, dst_id, rel, confidence) VALUES (?, ?, ?, ?)",
                    [
                        (
                            rng.randrange(n_ent) + 1,
                            rng.randrange(n_ent) + 1,
                            rng.choice(rels),
                            round(rng.uniform(0.5, 1.0), 3),
                        )
                        for _ in range(RELATIONS_PER_ENTITY * n_ent)
                    ],
                )
            vectors.put(store, spec, vectors.CHUNK, ((i + 1, str(i), vecs[i]) for i in range(n)))
            if n_ent:
                ent = np.random.default_rng(8).standard_normal((n_ent, 384)).astype(np.float32)
                ent /= np.linalg.norm(ent, axis=1, keepdims=True)
                vectors.put(store, spec, vectors.ENTITY, ((e + 1, str(e), ent[e]) for e in range(n_ent)))
        if sentences:  # SENTENCES_PER_CHUNK random unit vectors per chunk, as ingest's sentence vectors
            vectors.ensure_sentence_table(store)
            srng = np.random.default_rng(9)
            per = SENTENCES_PER_CHUNK
            with store.write():
                for start in range(0, n, 5000):
                    m = srng.standard_normal((min(5000, n - start) * per, 384)).astype(np.float32)
                    vectors.put_sentences(
                        store,
                        (
                            (start + j + 1, [str(start + j)] * per, vectors.quantize_unit(m[j * per : (j + 1) * per]))
                            for j in range(min(5000, n - start))
                        ),
                    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", action="append", default=[], help="a real database to time (repeatable)")
    ap.add_argument("--synthetic", type=int, default=100_000)
    ap.add_argument(
        "--no-graph", action="store_true", help="the synthetic database without entities (graph mode = hybrid)"
    )
    ap.add_argument(
        "--no-sentences",
        action="store_true",
        help="the synthetic database without sentence vectors (candidates scored by their chunk's vector)",
    )
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ex = Path(tmp) / "examples.sqlite"
        subprocess.run(
            [sys.executable, "-m", "kgr", "ingest", str(REPO / "examples" / "kb"), "--db", str(ex)],
            check=True,
            capture_output=True,
        )
        cold(ex)
        for db in args.db:
            warm(Path(db), db, args.runs)
        if args.synthetic:
            syn = Path(tmp) / "synthetic.sqlite"
            t = time.perf_counter()
            synthetic(syn, args.synthetic, graph=not args.no_graph, sentences=not args.no_sentences)
            kind = "without entities" if args.no_graph else "with a graph"
            kind += (
                ", without sentence vectors" if args.no_sentences else f", {SENTENCES_PER_CHUNK} sentence vectors each"
            )
            print(f"\n(synthetic database of {args.synthetic} chunks {kind} built in {time.perf_counter() - t:.0f} s)")
            warm(syn, f"synthetic {args.synthetic}", args.runs)


if __name__ == "__main__":
    main()
