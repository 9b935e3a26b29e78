"""``kgr eval retrieval``: Recall@2/5/10, MRR@10 and nDCG@10 per retrieval mode.

Three dataset layouts are read:

- an *eval folder* (HippoRAG style): ``corpus.json`` (or one ``*_corpus.json``), a JSON list
  of ``{title, text}`` passages, and ``gold.json``, a list of ``{question, type,
  gold_corpus_idx, gold_complete}``; only questions with complete gold are asked;
- a *BEIR folder*: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` and
  ``qrels/<split>.tsv``;
- a *golden folder*: ``docs/`` and ``annotations/queries.jsonl`` (``q``, ``gold_docs``, ``kind``).

When the database does not exist yet, the corpus is ingested into it through the normal
pipeline (one Markdown document per passage, titled by the passage title); when it
exists, it is reused. Scores are per document: the ranked chunks are reduced to their
documents, first occurrence first.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from kgr.config import settings_of
from kgr.errors import KgrError
from kgr.store.lock import reading, writing

CUTOFFS = (2, 5, 10)


@dataclass
class Question:
    id: str
    text: str
    gold: set[str]  # document paths
    type: str = "all"


@dataclass
class Dataset:
    name: str
    kind: str  # eval, beir, golden
    questions: list[Question]
    write_corpus: Callable[[Path], None] | None  # writes one file per passage into a folder
    docs_dir: Path | None = None  # golden: ingest this folder as it is


def passage_path(idx: int | str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(idx))
    return f"p/{safe}.md"


def _passage_markdown(title: str, text: str) -> str:
    title = " ".join((title or "").split())
    return f"# {title}\n\n{text.strip()}\n" if title else f"{text.strip()}\n"


def _write_all(folder: Path, items: Iterable[tuple[str, str, str]]) -> None:
    (folder / "p").mkdir(parents=True, exist_ok=True)
    for key, title, text in items:
        (folder / passage_path(key)).write_text(_passage_markdown(title, text), encoding="utf-8")


def load_dataset(path: str | Path, *, split: str = "test") -> Dataset:
    root = Path(path)
    if not root.is_dir():
        raise KgrError(f"{root} is not a folder", hint="--dataset takes an eval, BEIR or golden folder")
    if (root / "annotations" / "queries.jsonl").exists() and (root / "docs").is_dir():
        return _golden(root)
    if (root / "corpus.jsonl").exists() and (root / "queries.jsonl").exists():
        return _beir(root, split)
    if (root / "gold.json").exists():
        return _eval_folder(root)
    raise KgrError(
        f"{root}: no dataset found",
        hint="expected corpus.json + gold.json, a BEIR folder (corpus.jsonl, queries.jsonl, qrels/), "
        "or docs/ + annotations/queries.jsonl",
    )


def _eval_folder(root: Path) -> Dataset:
    corpus_file = root / "corpus.json"
    if not corpus_file.exists():
        lists = [
            p for p in sorted(root.glob("*_corpus.json")) if p.read_text(encoding="utf-8").lstrip().startswith("[")
        ]
        if len(lists) != 1:
            raise KgrError(f"{root}: expected corpus.json or exactly one *_corpus.json list, found {len(lists)}")
        corpus_file = lists[0]
    corpus = json.loads(corpus_file.read_text(encoding="utf-8"))
    if not isinstance(corpus, list):
        raise KgrError(f"{corpus_file} is not a JSON list of {{title, text}} passages")
    gold = json.loads((root / "gold.json").read_text(encoding="utf-8"))
    questions = []
    for q in gold:
        if q.get("gold_complete") is False:
            continue
        idx = q.get("gold_corpus_idx") or []
        if not idx:
            continue
        questions.append(
            Question(
                str(q.get("id", len(questions))),
                q["question"],
                {passage_path(i) for i in idx},
                str(q.get("type") or "all"),
            )
        )

    def write(folder: Path) -> None:
        _write_all(folder, ((str(i), p.get("title", ""), p.get("text", "")) for i, p in enumerate(corpus)))

    return Dataset(root.name, "eval", questions, write)


def _beir(root: Path, split: str) -> Dataset:
    qrels_file = root / "qrels" / f"{split}.tsv"
    if not qrels_file.exists():
        raise KgrError(f"{qrels_file} not found", hint="--split names a file in qrels/ (test, train, dev)")
    rel: dict[str, set[str]] = defaultdict(set)
    for n, line in enumerate(qrels_file.read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if n == 0 and parts[0] == "query-id":
            continue
        if len(parts) >= 3 and float(parts[2]) > 0:
            rel[parts[0]].add(passage_path(parts[1]))
    questions = []
    for line in (root / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        if str(q["_id"]) in rel:
            questions.append(Question(str(q["_id"]), q["text"], rel[str(q["_id"])]))

    def write(folder: Path) -> None:
        def items():
            with open(root / "corpus.jsonl", encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        d = json.loads(line)
                        yield str(d["_id"]), d.get("title", ""), d.get("text", "")

        _write_all(folder, items())

    return Dataset(f"{root.name} ({split})", "beir", questions, write)


def _golden(root: Path) -> Dataset:
    questions = []
    for line in (root / "annotations" / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            questions.append(Question(str(q.get("id")), q["q"], set(q.get("gold_docs") or []), q.get("kind") or "all"))
    return Dataset(root.name, "golden", questions, None, docs_dir=root / "docs")


def ensure_database(ds: Dataset, db: str | Path, cfg, *, progress: bool = False) -> None:
    """Ingest the dataset's corpus into ``db`` unless it already exists."""
    from kgr.ingest.pipeline import ingest

    db = Path(db)
    if db.exists():
        return
    with writing(db) as store:
        if ds.docs_dir is not None:
            ingest([str(ds.docs_dir)], store, config=cfg, progress=progress)
            return
        with tempfile.TemporaryDirectory(prefix="kgr-eval-") as tmp:
            folder = Path(tmp) / "corpus"
            ds.write_corpus(folder)
            # the root is recorded relative to the database: prune must not run against a vanished folder
            ingest([str(folder)], store, config=cfg, progress=progress, prune=False)


def score_ranking(ranked: list[str], gold: set[str]) -> dict[str, float]:
    out = {}
    for c in CUTOFFS:
        out[f"recall@{c}"] = len(set(ranked[:c]) & gold) / len(gold)
    rr = 0.0
    for i, d in enumerate(ranked[:10], 1):
        if d in gold:
            rr = 1.0 / i
            break
    out["mrr@10"] = rr
    dcg = sum(1.0 / math.log2(i + 1) for i, d in enumerate(ranked[:10], 1) if d in gold)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold), 10) + 1))
    out["ndcg@10"] = dcg / idcg if idcg else 0.0
    return out


def doc_ranking(result: dict[str, Any], depth: int = 10) -> list[str]:
    seen: list[str] = []
    for r in result["results"]:
        if r["path"] not in seen:
            seen.append(r["path"])
            if len(seen) >= depth:
                break
    return seen


def evaluate(
    ds: Dataset,
    db: str | Path,
    cfg,
    *,
    modes: list[str],
    limit: int | None = None,
    on_question: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    from kgr.retrieval import query as query_mod
    from kgr.store import vectors

    questions = ds.questions[:limit] if limit else ds.questions
    cfg = settings_of(cfg)
    out = []
    with reading(db) as store:
        embedder = None
        if any(m != "bm25" for m in modes) and vectors.stored_spec(store) is not None:
            from kgr.embedders import get_embedder

            embedder = get_embedder(cfg, purpose="query")
            vectors.check_spec(store, vectors.VectorSpec(embedder.model, int(embedder.dim)))
        qvecs: dict[str, Any] = {}

        def embed_query(text: str):
            if text not in qvecs:
                qvecs[text] = embedder.embed_queries([text])[0]
            return qvecs[text]

        for mode in modes:
            totals: dict[str, float] = defaultdict(float)
            by_type: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
            for q in questions:
                res = query_mod.query_with_settings(
                    store,
                    q.text,
                    cfg.retrieval,
                    k=30,
                    mode=mode,
                    embed_query=embed_query if embedder else None,
                    vectors_in_memory=True,
                )
                s = score_ranking(doc_ranking(res), q.gold)
                for key, v in s.items():
                    totals[key] += v
                    by_type[q.type][key] += v
                by_type[q.type]["n"] += 1
                if on_question:
                    on_question()
            n = len(questions)
            row = {"mode": mode, **{key: round(v / n, 4) for key, v in totals.items()}, "n": n}
            row["by_type"] = {
                t: {**{key: round(v / d["n"], 4) for key, v in d.items() if key != "n"}, "n": int(d["n"])}
                for t, d in sorted(by_type.items())
            }
            out.append(row)
    return out


def format_table(name: str, rows: list[dict[str, Any]]) -> str:
    keys = [f"recall@{c}" for c in CUTOFFS] + ["mrr@10", "ndcg@10"]
    lines = [f"{name}: {rows[0]['n'] if rows else 0} questions", f"{'mode':<8}" + "".join(f"{k:>10}" for k in keys)]
    for row in rows:
        lines.append(f"{row['mode']:<8}" + "".join(f"{100 * row[k]:>10.1f}" for k in keys))
    types = sorted({t for row in rows for t in row["by_type"]})
    if len(types) > 1:
        lines.append("")
        lines.append(f"{'R@5 by type':<18}" + "".join(f"{row['mode']:>9}" for row in rows) + f"{'n':>6}")
        for t in types:
            n = next(row["by_type"][t]["n"] for row in rows if t in row["by_type"])
            lines.append(
                f"{t[:18]:<18}"
                + "".join(f"{100 * row['by_type'].get(t, {}).get('recall@5', 0):>9.1f}" for row in rows)
                + f"{n:>6}"
            )
    return "\n".join(lines)
