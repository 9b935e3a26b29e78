"""Why graph mode misses a gold passage at Recall@5: one cause for each miss.

    python bench/retrieval_misses.py DB DATASET [--show]

DB is built first by `kgr eval retrieval --dataset DATASET --db DB`. A page's subject entity
is one whose name covers at least half its title (the rule graph mode uses for "a page about
an entity"). For each gold page not in graph mode's top 5 documents it tells whether the
page has a subject entity at all, whether that subject is mentioned (and linked) in the
question's other gold pages (the bridge the expansion would follow), and if so whether the
bridge was seen in the top 5 and where the page ranked. ``--show`` also prints each miss: the
question, the page's title, its cause, the other gold pages' titles and whether their text
contains the missed page's title (parenthesis cut) at all. Reporting only: nothing is tuned.
"""

from __future__ import annotations

import argparse
import collections

from kgr import config
from kgr.embedders import get_embedder
from kgr.eval import retrieval as evalret
from kgr.retrieval import query
from kgr.store import Store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("dataset")
    ap.add_argument("--show", action="store_true", help="print every miss with its cause")
    args = ap.parse_args()
    cfg = config.load(None)
    embedder = get_embedder(cfg, purpose="query")
    st = Store(args.db, readonly=True)
    ds = evalret.load_dataset(args.dataset)
    r, w = cfg["retrieval"], query.Weights.from_config(cfg)

    def about(path: str) -> set[int]:
        rows = st.query(
            "SELECT DISTINCT m.entity_id, m.surface, d.title FROM mentions m JOIN docs d ON d.id = m.doc_id "
            "WHERE d.path = ? AND json_extract(m.features, '$.in_title') AND m.source != 'coref'",
            (path,),
        )
        return {
            eid for eid, surf, title in rows if len(surf or "") >= query.ABOUT_SHARE * len((title or "").strip() or " ")
        }

    def mentioned(path: str) -> set[int]:
        return {
            row[0]
            for row in st.query(
                "SELECT DISTINCT m.entity_id FROM mentions m JOIN docs d ON d.id = m.doc_id WHERE d.path = ? AND m.source != 'coref'",
                (path,),
            )
        }

    def title_of(path: str) -> str:
        return st.scalar("SELECT title FROM docs WHERE path = ?", (path,)) or ""

    def text_of(path: str) -> str:
        return " ".join(
            row[0]
            for row in st.query("SELECT c.text FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE d.path = ?", (path,))
        )

    cache: dict[str, object] = {}

    def embed(text: str):
        # graph mode embeds a second text too (the feedback search): each text gets its own vector
        if text not in cache:
            cache[text] = embedder.embed_queries([text])[0]
        return cache[text]

    causes: collections.Counter = collections.Counter()
    n = 0
    for q in ds.questions:
        res = query.hybrid_query(
            st, q.text, k=50, hops=r["hops"], rels=r["rels"], mode="graph", embed_query=embed, weights=w
        )
        docs = evalret.doc_ranking(res, depth=1000)
        top = docs[:5]
        for g in q.gold:
            n += 1
            if g in top:
                causes["found"] += 1
                continue
            subject = about(g)
            partners = [p for p in q.gold if p != g]
            rank = docs.index(g) if g in docs else None
            if not subject:
                cause = "no subject entity for the page (extraction/title)"
            elif any(subject & mentioned(p) for p in top):
                where = ">50" if rank is None else "6-10" if rank < 10 else "11-50"
                cause = f"bridge seen in a top-5 page, ranked {where}"
            elif any(subject & mentioned(p) for p in partners):
                if any(p in top for p in partners):
                    cause = "bridge in the other gold page (in the top 5), not among the seeding chunks"
                else:
                    cause = "bridge in the other gold page, which is not in the top 5 (first hop missed)"
            else:
                cause = "subject never mentioned-and-linked in the other gold pages (extraction/linking)"
            causes[cause] += 1
            if args.show:
                title = title_of(g)
                short = title.split(" (")[0].lower()
                said = any(short and short in text_of(p).lower() for p in partners)
                print(f"miss: {q.text[:110]}\n  page {title!r}: {cause}")
                print(f"  other gold pages {[title_of(p) for p in partners]}; their text contains the title: {said}")
    print(f"{args.dataset}: {n} gold pages")
    for cause, k in causes.most_common():
        print(f"{k:5d} {100 * k / n:5.1f}%  {cause}")


if __name__ == "__main__":
    main()
