"""The database: one SQLite file of documents, chunks, vectors, full-text index and graph.

``db`` opens it (extensions, pragmas, transactions) and ``migrations`` shapes it; ``lock`` is
the one-writer-process lock and the two ways to open the database (``reading``, and
``writing``: under the lock), ``root`` the knowledge folder it holds, ``vectors`` the
embeddings, ``graph_rows`` the writing of entities and relations, ``bfs`` the traversal.
Nothing here knows about files, stages or MCP.
"""

from kgr.store.db import APPLICATION_ID, Store, dumps, loads, now_ms, open_store

__all__ = ["APPLICATION_ID", "Store", "dumps", "loads", "now_ms", "open_store"]
