"""Numbered schema migrations, tracked in ``PRAGMA user_version``.

Each migration is applied once, in order, inside one transaction. Never edit a
released migration: add the next one. Vector tables (``chunk_vec``, ``entity_vec``)
are sqlite-vec ``vec0`` tables whose dimension depends on the embedding model, so
they are created by ``Store.ensure_vectors`` when the model is first recorded.
"""

from __future__ import annotations

# `PRAGMA application_id` of every kgr database (b"kgr1"): how kgr tells its own files from
# another application's SQLite file, which it must never write into.
APPLICATION_ID = 0x6B677231

M001_INITIAL = r"""
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT
);

CREATE TABLE events (
  id      INTEGER PRIMARY KEY,
  ts_ms   INTEGER NOT NULL,
  kind    TEXT NOT NULL,          -- ingest, delete, error, ...
  path    TEXT,
  message TEXT
);

-- One row per file of the knowledge root (status ok), and per file that could not
-- be parsed (status failed, reason in error) so it is not retried until it changes.
CREATE TABLE docs (
  id         INTEGER PRIMARY KEY,
  path       TEXT NOT NULL UNIQUE,   -- relative to the knowledge root
  source     TEXT NOT NULL DEFAULT 'file',  -- file, memory, url
  format     TEXT,
  mtime_ms   INTEGER,
  size       INTEGER,
  file_hash  TEXT,                   -- sha256 of the file's bytes
  hash       TEXT,                   -- sha256 of the normalized text
  sig        TEXT,                   -- sha256 over hash and chunks: same sig, no content to write
  graph_sig  TEXT,                   -- sha256 over the mentions, entities and relations loaded from it
  title      TEXT,
  lang       TEXT,
  text       TEXT,
  meta       TEXT NOT NULL DEFAULT '{}',   -- JSON
  status     TEXT NOT NULL DEFAULT 'ok',   -- ok, failed, skipped
  error      TEXT,
  updated_ms INTEGER
);
CREATE INDEX idx_docs_hash ON docs(hash);
CREATE INDEX idx_docs_status ON docs(status);

CREATE TABLE chunks (
  id        INTEGER PRIMARY KEY,
  doc_id    INTEGER NOT NULL REFERENCES docs(id) ON DELETE CASCADE,
  ord       INTEGER NOT NULL,
  text      TEXT NOT NULL,
  prelude   TEXT,
  section   TEXT,
  headings  TEXT NOT NULL DEFAULT '[]',    -- JSON list
  start     INTEGER,
  "end"     INTEGER,
  tokens    INTEGER,
  hash      TEXT,
  meta      TEXT NOT NULL DEFAULT '{}',
  UNIQUE (doc_id, ord)
);
CREATE INDEX idx_chunks_hash ON chunks(hash);

CREATE VIRTUAL TABLE chunks_fts USING fts5(
  text, prelude,
  content='chunks', content_rowid='id',
  tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
  INSERT INTO chunks_fts(rowid, text, prelude) VALUES (new.id, new.text, new.prelude);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
  INSERT INTO chunks_fts(chunks_fts, rowid, text, prelude) VALUES ('delete', old.id, old.text, old.prelude);
END;
CREATE TRIGGER chunks_au AFTER UPDATE ON chunks BEGIN
  INSERT INTO chunks_fts(chunks_fts, rowid, text, prelude) VALUES ('delete', old.id, old.text, old.prelude);
  INSERT INTO chunks_fts(rowid, text, prelude) VALUES (new.id, new.text, new.prelude);
END;

CREATE TABLE entities (
  id          INTEGER PRIMARY KEY,
  key         TEXT NOT NULL UNIQUE,        -- stable: type + norm
  name        TEXT NOT NULL,
  type        TEXT NOT NULL,
  norm        TEXT NOT NULL,
  aliases     TEXT NOT NULL DEFAULT '[]',  -- JSON list
  description TEXT,
  popularity  REAL NOT NULL DEFAULT 0,
  origin      TEXT NOT NULL DEFAULT 'extracted',  -- extracted, manual
  status      TEXT NOT NULL DEFAULT 'active',     -- active, orphaned, merged
  meta        TEXT NOT NULL DEFAULT '{}',
  created_ms  INTEGER,
  updated_ms  INTEGER
);
CREATE INDEX idx_entities_norm ON entities(norm);
CREATE INDEX idx_entities_type_name ON entities(type, name);

CREATE VIRTUAL TABLE entities_fts USING fts5(
  name, aliases,
  content='entities', content_rowid='id',
  tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER entities_ai AFTER INSERT ON entities BEGIN
  INSERT INTO entities_fts(rowid, name, aliases) VALUES (new.id, new.name, new.aliases);
END;
CREATE TRIGGER entities_ad AFTER DELETE ON entities BEGIN
  INSERT INTO entities_fts(entities_fts, rowid, name, aliases) VALUES ('delete', old.id, old.name, old.aliases);
END;
CREATE TRIGGER entities_au AFTER UPDATE OF name, aliases ON entities BEGIN
  INSERT INTO entities_fts(entities_fts, rowid, name, aliases) VALUES ('delete', old.id, old.name, old.aliases);
  INSERT INTO entities_fts(rowid, name, aliases) VALUES (new.id, new.name, new.aliases);
END;

CREATE TABLE mentions (
  id         INTEGER PRIMARY KEY,
  entity_id  INTEGER REFERENCES entities(id) ON DELETE SET NULL,
  doc_id     INTEGER NOT NULL REFERENCES docs(id) ON DELETE CASCADE,
  chunk_id   INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
  start      INTEGER,
  "end"      INTEGER,
  surface    TEXT NOT NULL,
  type       TEXT,
  score      REAL,
  source     TEXT,                         -- ner, gazetteer, regex, coref
  link_score REAL,
  features   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX idx_mentions_doc ON mentions(doc_id);
CREATE INDEX idx_mentions_chunk ON mentions(chunk_id);
CREATE INDEX idx_mentions_entity ON mentions(entity_id);

CREATE TABLE relation_types (
  name           TEXT PRIMARY KEY,
  description    TEXT,
  directionality TEXT NOT NULL DEFAULT 'balanced',  -- strong, weak, balanced
  source_types   TEXT NOT NULL DEFAULT '[]',
  target_types   TEXT NOT NULL DEFAULT '[]'
);
INSERT INTO relation_types(name, description, directionality) VALUES
  ('defines',    'src introduces or defines dst', 'strong'),
  ('refers_to',  'src informally refers to dst', 'weak'),
  ('part_of',    'src is a component or member of dst', 'strong'),
  ('uses',       'src calls, integrates with or consumes dst', 'strong'),
  ('depends_on', 'src cannot work without dst', 'strong'),
  ('precedes',   'src comes before dst', 'strong'),
  ('owned_by',   'src is owned, run or maintained by dst', 'strong'),
  ('located_in', 'src runs in or sits in dst', 'strong'),
  ('cites',      'src formally cites dst', 'weak'),
  ('same_as',    'src and dst name the same thing', 'balanced');

CREATE TABLE relations (
  id         INTEGER PRIMARY KEY,
  src_id     INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  dst_id     INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  rel        TEXT NOT NULL,
  confidence REAL NOT NULL DEFAULT 1.0,
  strength   TEXT NOT NULL DEFAULT 'medium',   -- weak, medium, strong
  origin     TEXT NOT NULL DEFAULT 'extracted', -- extracted, manual
  meta       TEXT NOT NULL DEFAULT '{}',
  created_ms INTEGER,
  UNIQUE (src_id, dst_id, rel)
);
CREATE INDEX idx_rel_src_rel ON relations(src_id, rel);
CREATE INDEX idx_rel_dst_rel ON relations(dst_id, rel);

-- Which chunk supports which edge: deleting a document removes exactly its evidence.
CREATE TABLE relation_evidence (
  id          INTEGER PRIMARY KEY,
  relation_id INTEGER NOT NULL REFERENCES relations(id) ON DELETE CASCADE,
  doc_id      INTEGER NOT NULL REFERENCES docs(id) ON DELETE CASCADE,
  chunk_id    INTEGER REFERENCES chunks(id) ON DELETE CASCADE,
  start       INTEGER,
  "end"       INTEGER,
  sentence    TEXT,
  pattern     TEXT,
  confidence  REAL
);
CREATE INDEX idx_evidence_relation ON relation_evidence(relation_id);
CREATE INDEX idx_evidence_doc ON relation_evidence(doc_id);

CREATE VIEW graph_edges AS SELECT src_id AS src, dst_id AS dst, rel FROM relations;

CREATE TABLE observations (
  id            INTEGER PRIMARY KEY,
  entity_id     INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  content       TEXT NOT NULL,
  source        TEXT NOT NULL DEFAULT 'manual',
  doc_id        INTEGER REFERENCES docs(id) ON DELETE SET NULL,
  importance    REAL NOT NULL DEFAULT 0.5,
  access_count  INTEGER NOT NULL DEFAULT 0,
  last_access_ms INTEGER,
  valid_from_ms  INTEGER,
  valid_until_ms INTEGER,
  created_ms    INTEGER
);
CREATE INDEX idx_observations_entity ON observations(entity_id);

CREATE TABLE templates (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  body       TEXT NOT NULL,
  variables  TEXT NOT NULL DEFAULT '{}',  -- JSON: name -> read-only SQL
  entity_type TEXT,
  created_ms INTEGER,
  updated_ms INTEGER
);

CREATE TABLE document_cache (
  entity_id  INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  template_id INTEGER NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
  signature  TEXT NOT NULL,     -- dependency signature over the node and what its variables read
  content    TEXT NOT NULL,
  created_ms INTEGER,
  PRIMARY KEY (entity_id, template_id)
);

CREATE TABLE gazetteer (
  term   TEXT PRIMARY KEY,
  type   TEXT,
  freq   INTEGER NOT NULL DEFAULT 0,
  source TEXT          -- title, heading, bold, code, token
);

-- Embedding cache: (content hash, model, dim) -> vector, so unchanged text is never embedded twice.
CREATE TABLE embed_cache (
  hash   TEXT NOT NULL,
  model  TEXT NOT NULL,
  dim    INTEGER NOT NULL,
  vector BLOB NOT NULL,
  PRIMARY KEY (hash, model, dim)
);
"""

# The authoring profile (seed 002): template descriptions and node types, the node ids a cached
# document depends on, and the built-in default template (updatable, never deleted).
M004_AUTHORING = r"""
ALTER TABLE templates ADD COLUMN description TEXT;
ALTER TABLE templates ADD COLUMN node_types TEXT NOT NULL DEFAULT '[]';
ALTER TABLE document_cache ADD COLUMN dependencies TEXT NOT NULL DEFAULT '[]';
INSERT OR IGNORE INTO templates(name, body, variables, description, node_types, created_ms, updated_ms) VALUES (
  'default',
  '# {{name}}

{{#type}}*{{type}}*{{/type}}

{{#summary}}{{summary}}

{{/summary}}{{#has_aliases}}Also known as: {{#aliases}}{{alias}}{{^last}}, {{/last}}{{/aliases}}.

{{/has_aliases}}{{#has_outgoing}}## Relations

{{#outgoing}}* {{relation}} {{target}}{{#strength}} ({{strength}}){{/strength}}
{{/outgoing}}

{{/has_outgoing}}{{#has_incoming}}## Referenced by

{{#incoming}}* {{source}} {{relation}} {{name}}{{#strength}} ({{strength}}){{/strength}}
{{/incoming}}

{{/has_incoming}}{{#has_observations}}## Observations

{{#observations}}* {{content}}
{{/observations}}
{{/has_observations}}',
  '{
 "aliases": "SELECT j.value AS alias, j.key = json_array_length(e.aliases) - 1 AS last FROM entities e, json_each(e.aliases) j WHERE e.id = :id ORDER BY j.key",
 "outgoing": "SELECT r.rel AS relation, t.name AS target, t.id AS target_id, r.strength AS strength FROM relations r JOIN entities t ON t.id = r.dst_id WHERE r.src_id = :id ORDER BY r.rel, t.name LIMIT 200",
 "incoming": "SELECT r.rel AS relation, s.name AS source, s.id AS source_id, r.strength AS strength FROM relations r JOIN entities s ON s.id = r.src_id WHERE r.dst_id = :id ORDER BY r.rel, s.name LIMIT 200",
 "observations": "SELECT content FROM observations WHERE entity_id = :id AND (valid_until_ms IS NULL) ORDER BY id LIMIT 200"
}',
  'The built-in template of nodes without one of their own.', '[]',
  CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER));
"""

# The memory profile (seed 001): search_nodes is a case-insensitive substring search over
# observations. A trigram index finds the candidates for a query of three or more ASCII
# characters; observations_folding lists those holding the only two characters whose lower
# case is ASCII in JavaScript and Python (U+0130, U+212A), which ASCII case folding misses.
# kgr.memory.graph checks every candidate exactly. entities_trigram and entities_folding do the same
# for entity names and types.
M002_MEMORY = r"""
CREATE VIRTUAL TABLE observations_trigram USING fts5(
  content, content='observations', content_rowid='id', tokenize='trigram case_sensitive 0'
);
INSERT INTO observations_trigram(observations_trigram) VALUES ('rebuild');
CREATE TRIGGER observations_trigram_ai AFTER INSERT ON observations BEGIN
  INSERT INTO observations_trigram(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER observations_trigram_ad AFTER DELETE ON observations BEGIN
  INSERT INTO observations_trigram(observations_trigram, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER observations_trigram_au AFTER UPDATE OF content ON observations BEGIN
  INSERT INTO observations_trigram(observations_trigram, rowid, content) VALUES ('delete', old.id, old.content);
  INSERT INTO observations_trigram(rowid, content) VALUES (new.id, new.content);
END;

CREATE TABLE observations_folding (
  observation_id INTEGER PRIMARY KEY REFERENCES observations(id) ON DELETE CASCADE
);
INSERT INTO observations_folding(observation_id)
  SELECT id FROM observations WHERE instr(content, char(304)) OR instr(content, char(8490));
CREATE TRIGGER observations_folding_ai AFTER INSERT ON observations
  WHEN instr(new.content, char(304)) OR instr(new.content, char(8490)) BEGIN
  INSERT OR IGNORE INTO observations_folding(observation_id) VALUES (new.id);
END;
CREATE TRIGGER observations_folding_au AFTER UPDATE OF content ON observations BEGIN
  DELETE FROM observations_folding WHERE observation_id = old.id;
  INSERT OR IGNORE INTO observations_folding(observation_id)
    SELECT new.id WHERE instr(new.content, char(304)) OR instr(new.content, char(8490));
END;

-- the same for entity names and types
CREATE VIRTUAL TABLE entities_trigram USING fts5(
  name, type, content='entities', content_rowid='id', tokenize='trigram case_sensitive 0'
);
INSERT INTO entities_trigram(entities_trigram) VALUES ('rebuild');
CREATE TRIGGER entities_trigram_ai AFTER INSERT ON entities BEGIN
  INSERT INTO entities_trigram(rowid, name, type) VALUES (new.id, new.name, new.type);
END;
CREATE TRIGGER entities_trigram_ad AFTER DELETE ON entities BEGIN
  INSERT INTO entities_trigram(entities_trigram, rowid, name, type) VALUES ('delete', old.id, old.name, old.type);
END;
CREATE TRIGGER entities_trigram_au AFTER UPDATE OF name, type ON entities BEGIN
  INSERT INTO entities_trigram(entities_trigram, rowid, name, type) VALUES ('delete', old.id, old.name, old.type);
  INSERT INTO entities_trigram(rowid, name, type) VALUES (new.id, new.name, new.type);
END;
CREATE TABLE entities_folding (
  entity_id INTEGER PRIMARY KEY REFERENCES entities(id) ON DELETE CASCADE
);
INSERT INTO entities_folding(entity_id)
  SELECT id FROM entities WHERE instr(name || type, char(304)) OR instr(name || type, char(8490));
CREATE TRIGGER entities_folding_ai AFTER INSERT ON entities
  WHEN instr(new.name || new.type, char(304)) OR instr(new.name || new.type, char(8490)) BEGIN
  INSERT OR IGNORE INTO entities_folding(entity_id) VALUES (new.id);
END;
CREATE TRIGGER entities_folding_au AFTER UPDATE OF name, type ON entities BEGIN
  DELETE FROM entities_folding WHERE entity_id = old.id;
  INSERT OR IGNORE INTO entities_folding(entity_id)
    SELECT new.id WHERE instr(new.name || new.type, char(304)) OR instr(new.name || new.type, char(8490));
END;
"""

# graph mode reads the pages about an entity, wherever they are: the few mentions in a title,
# not the thousands in the text of a name every page uses
M005_TITLE_MENTIONS = """
CREATE INDEX IF NOT EXISTS idx_mentions_in_title ON mentions(entity_id, chunk_id)
  WHERE json_extract(features, '$.in_title');
"""

# kgr databases say they are kgr's; those made before this are recognised by their meta table
M006_APPLICATION_ID = f"PRAGMA application_id = {APPLICATION_ID};"

# `kgr status` lists the documents kept but not whole (meta.partial: truncated, bytes
# replaced) without reading every document: meta is stored after the text, so a scan would
# read the whole corpus
M007_PARTIAL_DOCS = """
CREATE INDEX IF NOT EXISTS idx_docs_partial ON docs(path)
  WHERE json_extract(meta, '$.partial') IS NOT NULL;
"""

# Tags per document (seed 000 §4 and §11.1): those given to ingest_docs (origin 'ingest', kept
# across re-ingests) and those of the document's front matter (origin 'meta', replaced when the
# document is loaded again). hybrid_query's tags filter reads them by tag (idx_doc_tags_tag).
M008_DOC_TAGS = """
CREATE TABLE IF NOT EXISTS doc_tags (
  doc_id INTEGER NOT NULL REFERENCES docs(id) ON DELETE CASCADE,
  tag    TEXT NOT NULL COLLATE NOCASE,
  origin TEXT NOT NULL DEFAULT 'ingest',
  PRIMARY KEY (doc_id, tag, origin)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_doc_tags_tag ON doc_tags(tag, doc_id);
INSERT OR IGNORE INTO doc_tags(doc_id, tag, origin)
  SELECT d.id, trim(j.value), 'meta' FROM docs d, json_each(d.meta, '$.tags') j
  WHERE json_type(d.meta, '$.tags') = 'array' AND j.type = 'text' AND trim(j.value) != '';
"""


# The memory profile's pages (read_graph) walk the memory entities in insertion order from a
# cursor: this index holds them alone, in id order, so a page reads only its own rows (the key
# index would sort every memory entity for each page)
M009_MEMORY_PAGES = """
CREATE INDEX IF NOT EXISTS idx_entities_memory_pages ON entities(id) WHERE key >= 'memory:' AND key < 'memory;';
"""

MIGRATIONS: list[tuple[str, str]] = [
    ("m001_initial", M001_INITIAL),
    ("m004_authoring", M004_AUTHORING),
    ("m002_memory", M002_MEMORY),
    ("m005_title_mentions", M005_TITLE_MENTIONS),
    ("m006_application_id", M006_APPLICATION_ID),
    ("m007_partial_docs", M007_PARTIAL_DOCS),
    ("m008_doc_tags", M008_DOC_TAGS),
    ("m009_memory_pages", M009_MEMORY_PAGES),
]

LATEST = len(MIGRATIONS)
