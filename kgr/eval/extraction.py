"""`kgr eval extraction`: precision, recall and F1 against a hand-annotated corpus.

The corpus format is that of a golden folder (docs/ plus annotations/ with
mentions.jsonl, entities.jsonl, relations.jsonl; see its README). The documents are
ingested into a scratch database through the normal pipeline, then:

- mentions match on (document, surface, n), where n is the occurrence of the
  surface in the document counted at token boundaries, so the score does not
  depend on how HTML, PDF or DOCX text was laid out;
- canonical entities are scored with B-cubed over the correctly found mentions:
  precision falls when different gold entities share a predicted entity (homonyms
  merged), recall falls when one gold entity is split (aliases not merged);
- relations match on (document, source, relation, destination) after mapping each
  predicted entity to the gold entity most of its matched mentions belong to; a gold
  same_as whose two ends were merged into one entity counts as found.
"""

from __future__ import annotations

import collections
import re
import tempfile
from pathlib import Path
from typing import Any

import orjson

from kgr.errors import KgrError
from kgr.store import Store
from kgr.store.lock import writing

WORD = r"A-Za-z0-9_\u00C0-\u024F"


def surface_regex(surface: str) -> re.Pattern:
    return re.compile(rf"(?<![{WORD}])(?<!\d-)" + re.escape(surface) + rf"(?![{WORD}])(?!-\d)")


def occurrence_index(text: str, surface: str, start: int) -> int | None:
    for n, m in enumerate(surface_regex(surface).finditer(text), 1):
        if m.start() == start:
            return n
        if m.start() > start:
            return None
    return None


def _jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def prf(tp: int, npred: int, ngold: int) -> dict[str, float]:
    p = tp / npred if npred else 0.0
    r = tp / ngold if ngold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(f, 4),
        "tp": tp,
        "predicted": npred,
        "gold": ngold,
    }


def eval_extraction(golden: str | Path, *, db: str | Path | None = None, config=None) -> dict[str, Any]:
    golden = Path(golden)
    docs_dir, ann = golden / "docs", golden / "annotations"
    for need in (docs_dir, ann / "mentions.jsonl", ann / "entities.jsonl", ann / "relations.jsonl"):
        if not need.exists():
            raise KgrError(f"{need} not found", hint="--golden takes a folder with docs/ and annotations/")
    tmp = None
    if db is None:
        tmp = tempfile.TemporaryDirectory(prefix="kgr-eval-")
        db = Path(tmp.name) / "golden.sqlite"
    from kgr import config as config_mod
    from kgr.ingest.pipeline import ingest

    cfg = config if config is not None else config_mod.load()
    with writing(db) as store:
        ingest([str(docs_dir)], store, config=cfg)
        result = score(store, ann)
    if tmp is not None:
        tmp.cleanup()
    return result


def score(store: Store, ann: Path) -> dict[str, Any]:
    gold_mentions = _jsonl(ann / "mentions.jsonl")
    gold_relations = _jsonl(ann / "relations.jsonl")
    texts = dict(store.query("SELECT path, text FROM docs WHERE status='ok'"))

    gold_key: dict[tuple, str] = {}
    for m in gold_mentions:
        gold_key[(m["doc"], m["surface"], m["n"])] = m["entity"]

    # Pronouns and definite descriptions are annotated only in some documents (those whose
    # annotation has any): coreference predictions elsewhere can be neither right nor wrong.
    coref_docs = {m["doc"] for m in gold_mentions if m.get("kind", "name") != "name"}
    pred: dict[tuple, int] = {}
    seen_spans = set()
    rows = store.query(
        'SELECT d.path, c.start + m.start, c.start + m."end", m.entity_id, m.source FROM mentions m '
        "JOIN chunks c ON c.id = m.chunk_id JOIN docs d ON d.id = m.doc_id ORDER BY d.path, 2"
    )
    for path, start, end, eid, source in rows:
        if (path, start, end) in seen_spans or start is None:
            continue
        if source == "coref" and path not in coref_docs:
            continue
        seen_spans.add((path, start, end))
        text = texts.get(path, "")
        surface = text[start:end]
        n = occurrence_index(text, surface, start)
        if n is None:
            key = (path, surface, -start)  # not at a token boundary: cannot match
        else:
            key = (path, surface, n)
        pred.setdefault(key, eid)

    matched = [(k, pred[k], gold_key[k]) for k in pred if k in gold_key]
    mention = prf(len(matched), len(pred), len(gold_key))

    # B-cubed over matched mentions
    by_pred = collections.defaultdict(list)
    by_gold = collections.defaultdict(list)
    for i, (_, p, g) in enumerate(matched):
        by_pred[p].append(i)
        by_gold[g].append(i)
    bp = br = 0.0
    for _, p, g in matched:
        cp, cg = by_pred[p], by_gold[g]
        inter = sum(1 for j in cp if matched[j][2] == g)
        bp += inter / len(cp)
        br += inter / len(cg)
    n = len(matched)
    cp_, cr_ = (bp / n, br / n) if n else (0.0, 0.0)
    canonical = {
        "precision": round(cp_, 4),
        "recall": round(cr_, 4),
        "f1": round(2 * cp_ * cr_ / (cp_ + cr_), 4) if cp_ + cr_ else 0.0,
        "predicted_entities": len(by_pred),
        "gold_entities": len(by_gold),
    }

    # map predicted entities to gold ones by majority
    votes: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for _, p, g in matched:
        votes[p][g] += 1
    mapping = {p: c.most_common(1)[0][0] for p, c in votes.items()}
    gold_triples = {(r["doc"], r["src"], r["rel"], r["dst"]) for r in gold_relations}
    pred_triples = set()
    for path, src, dst, rel in store.query(
        "SELECT DISTINCT d.path, r.src_id, r.dst_id, r.rel FROM relation_evidence e "
        "JOIN relations r ON r.id = e.relation_id JOIN docs d ON d.id = e.doc_id"
    ):
        pred_triples.add((path, mapping.get(src, f"?{src}"), rel, mapping.get(dst, f"?{dst}")))
    # a merged rename counts as a found same_as
    merged = {g: {p for p, gg in mapping.items() if gg == g} for g in set(mapping.values())}
    for doc, s, rel, d in gold_triples:
        if rel == "same_as":
            ps = {p for p, c in votes.items() if c.get(s)}
            pd = {p for p, c in votes.items() if c.get(d)}
            if ps & pd:
                pred_triples.add((doc, s, rel, d))
    del merged
    relation = prf(len(pred_triples & gold_triples), len(pred_triples), len(gold_triples))
    by_rel = {}
    for rel in sorted({t[2] for t in gold_triples}):
        g = {t for t in gold_triples if t[2] == rel}
        p = {t for t in pred_triples if t[2] == rel}
        by_rel[rel] = prf(len(g & p), len(p), len(g))
    relation["by_relation"] = by_rel
    return {"mention": mention, "canonical": canonical, "relation": relation}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{'':<12}{'precision':>10}{'recall':>10}{'f1':>8}"]
    for name in ("mention", "canonical", "relation"):
        r = result[name]
        lines.append(f"{name:<12}{r['precision']:>10.3f}{r['recall']:>10.3f}{r['f1']:>8.3f}")
    by = result["relation"].get("by_relation") or {}
    if by:
        lines.append("")
        lines.append(f"{'relation':<12}{'precision':>10}{'recall':>10}{'f1':>8}{'gold':>6}")
        for rel, r in by.items():
            lines.append(f"{rel:<12}{r['precision']:>10.3f}{r['recall']:>10.3f}{r['f1']:>8.3f}{r['gold']:>6}")
    return "\n".join(lines)
