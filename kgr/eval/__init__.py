"""Scoring kgr against annotated corpora: ``extraction`` (mentions, entities, relations)
and ``retrieval`` (recall at k of questions)."""
