"""The kgr command line: a click group of thin commands over the library.

Every command parses options, opens streams, calls one library function and writes
records. Heavy libraries (spaCy, torch, pdfplumber) are imported inside the commands
that need them, so `kgr status` and `kgr --help` start instantly.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import IO, Any, Callable, Iterable, Iterator

import click

from kgr import __version__
from kgr.errors import ExitStatus, KgrError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# -- shared options ------------------------------------------------------------


def db_option(required: bool = False) -> Callable:
    return click.option(
        "--db",
        "db",
        type=click.Path(dir_okay=False),
        envvar="KGR_DB",
        show_envvar=True,
        required=required,
        help="The knowledge-base SQLite file [default: sqlite.path from --config, else kgr.sqlite].",
    )


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="KGR_CONFIG",
    show_envvar=True,
    help="YAML configuration file (flags > KGR_* environment > file > defaults).",
)

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")

input_argument = click.argument("input", type=click.File("rb"), default="-", required=False)

root_option = click.option(
    "--root", type=click.Path(file_okay=False), help="Knowledge root that doc paths are relative to."
)

progress_option = click.option(
    "--progress/--no-progress", default=None, help="Progress bar on stderr (default: when stderr is a terminal)."
)

# ingest and watch: what to build beside documents and chunks
graph_option = click.option(
    "--graph/--no-graph",
    default=True,
    show_default=True,
    help="Extract and link the knowledge graph of new and changed documents.",
)

embed_option = click.option(
    "--embed/--no-embed", default=True, show_default=True, help="Embed chunks and entities that have no vector yet."
)

null_option = click.option(
    "-0",
    "--null",
    "null",
    is_flag=True,
    help="Paths on stdin end with NUL, not newline (as find -print0 and xargs -0 use them).",
)


def stdin_paths(paths: tuple[str, ...], null: bool, command: str) -> list[str] | None:
    """The paths a command reads from stdin when PATHS is empty or just -, else None (use PATHS).

    One per line, or NUL-terminated with --null, so names holding newlines arrive whole; a name
    that is not UTF-8 keeps its bytes (os.fsdecode)."""
    if paths and list(paths) != ["-"]:
        if null:
            raise click.UsageError("--null applies to paths read from stdin: give no PATHS, or -")
        return None
    if sys.stdin.isatty():
        end = "NUL-terminated" if null else "one per line"
        warn(f"kgr {command}: reading paths from the terminal, {end} (Ctrl-D to end)")
    data = sys.stdin.buffer.read()
    if null:
        return [os.fsdecode(p) for p in data.split(b"\0") if p]
    return [os.fsdecode(line.rstrip(b"\r")) for line in data.split(b"\n") if line.strip()]


def load_config(config_path: str | None, **overrides: Any):
    """The settings (flags > KGR_* environment > file > defaults), parsed once per command."""
    from kgr import config

    ctx = click.get_current_context(silent=True)
    loaded = ctx.meta.setdefault("kgr.settings", {}) if ctx is not None else {}
    key = (config_path, tuple(sorted((k, v) for k, v in overrides.items() if v is not None)))
    if key not in loaded:
        loaded[key] = config.load(config_path, overrides=overrides)
    return loaded[key]


def named_db(db: str | None, config_path: str | None) -> bool:
    """Whether the database path was asked for (--db, $KGR_DB, sqlite.path in the config or
    environment), not the bare default: only then may a command create a database there."""
    from kgr.config import SqliteSettings

    return bool(db) or load_config(config_path).sqlite.path != SqliteSettings().path


def resolve_db(db: str | None, config_path: str | None) -> str:
    """--db, else $KGR_DB (click reads it), else the config's sqlite.path."""
    if db:
        return db
    from kgr import config

    ctx = click.get_current_context(silent=True)
    loaded = ctx.meta.get("kgr.settings", {}) if ctx is not None else {}
    # no flag sets sqlite.path, so any settings this command loaded from the same file will do
    same_file = [s for (path, _), s in loaded.items() if path == config_path]
    return config.db_path(same_file[0] if same_file else load_config(config_path))


# -- record streams --------------------------------------------------------------


class Counter:
    """Counts error records passing through a stage, and reports each on stderr."""

    def __init__(self, stage: str):
        self.stage = stage
        self.errors = 0

    def watch(self, records: Iterable[dict]) -> Iterator[dict]:
        for rec in records:
            if rec.get("kind") == "error":
                self.errors += 1
                if rec.get("stage") == self.stage or rec.get("stage") == "input":
                    warn(error_line(rec))
            elif self.stage == "normalize" and rec.get("kind") == "doc" and partial_reasons(rec):
                warn(partial_line(rec))  # a warning, not an error: the document is kept, the exit status stays 0
            yield rec


def partial_reasons(doc: dict) -> list[str]:
    """Why a doc record is partial (truncated, bytes replaced): empty when it is whole."""
    meta = doc.get("meta")
    partial = meta.get("partial") if isinstance(meta, dict) else None
    if not isinstance(partial, list):
        return []
    return [str(p.get("message") or p.get("reason")) if isinstance(p, dict) else str(p) for p in partial]


def partial_line(doc: dict, stage: str = "normalize") -> str:
    return f"{stage}: {printable(str(doc.get('path')))}: partial document: {'; '.join(partial_reasons(doc))} [partial]"


def error_line(rec: dict) -> str:
    where = rec.get("path")
    if where is None and rec.get("line") is not None:
        where = f"line {rec['line']}"
    reason = f" [{rec['reason']}]" if rec.get("reason") else ""
    prefix = f"{printable(str(where))}: " if where is not None and str(where) not in rec["message"] else ""
    return f"{rec.get('stage', '?')}: {prefix}{rec['message']}{reason}"


def printable(text: str) -> str:
    """Escape control characters and undecodable bytes so a log line stays one line."""
    return text.encode("unicode_escape", "backslashreplace").decode("ascii") if not text.isprintable() else text


def warn(message: str) -> None:
    click.echo(message, err=True)


def read_input(stream: IO[bytes], stage: str) -> Iterator[dict]:
    from kgr import jsonl

    if stream is sys.stdin.buffer or getattr(stream, "name", None) in ("<stdin>", "-"):
        if sys.stdin.isatty():
            warn(f"kgr {stage}: reading JSON Lines from the terminal (Ctrl-D to end)")
    return jsonl.read(stream, stage="input")


def emit(records: Iterable[dict]) -> None:
    from kgr import jsonl

    jsonl.write(records, sys.stdout.buffer, flush_each=not sys.stdout.isatty() and _line_buffered())


def _line_buffered() -> bool:
    return os.environ.get("KGR_FLUSH", "") == "1"


def finish(counter: Counter) -> None:
    if counter.errors:
        raise click.exceptions.Exit(ExitStatus.ERROR)


# -- the group ---------------------------------------------------------------------


class KgrGroup(click.Group):
    """The one error boundary: a KgrError becomes one line on stderr and its exit status."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KgrError as exc:
            if (ctx.obj or {}).get("traceback"):
                raise
            warn(f"Error: {printable(exc.message)}")
            if exc.hint:
                warn(f"Hint: {exc.hint}")
            ctx.exit(int(exc.exit_status))
        except BrokenPipeError:
            # The reader went away (`kgr ... | head`): exit quietly (click would exit 1).
            _stdout_to_devnull()
            ctx.exit(0)
        except OSError as exc:
            if (ctx.obj or {}).get("traceback"):
                raise
            name = f": {exc.filename}" if exc.filename else ""
            warn(f"Error: {exc.strerror or exc}{name}")
            ctx.exit(int(ExitStatus.ERROR))


@click.group(cls=KgrGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="kgr")
@click.option("--traceback", is_flag=True, envvar="KGR_TRACEBACK", help="Show the full traceback on errors.")
@click.pass_context
def cli(ctx: click.Context, traceback: bool) -> None:
    """kgr: a local-first Knowledge GraphRAG toolchain.

    Turns a knowledge directory into one SQLite file of chunks, vectors, a full-text
    index and a knowledge graph. Stages read and write JSON Lines:

    \b
        kgr normalize DOCS/ | kgr chunk | kgr load --db kb.sqlite

    or, in one process: kgr ingest DOCS/ --db kb.sqlite
    """
    ctx.ensure_object(dict)
    ctx.obj["traceback"] = traceback


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@root_option
@click.option(
    "--dedup-threshold",
    type=click.FloatRange(0, 1),
    help="Jaccard similarity above which a paragraph is a near-duplicate.",
)
@click.option("--max-file-bytes", type=click.IntRange(1), help="Skip files larger than this.")
@click.option("--workers", type=click.IntRange(0), help="Parser processes (0: one per core).")
@null_option
@config_option
def normalize(paths, root, dedup_threshold, max_file_bytes, workers, null, config_path):
    """Turn files into doc records (md, txt, html, pdf, docx).

    PATHS are files, directories or globs; with none (or -), paths are read from stdin,
    one per line, or NUL-terminated with -0. Secrets are redacted before any text leaves
    the stage.

    \b
    Example:
        kgr normalize examples/ | jq -r .title
        find examples -name '*.md' -print0 | kgr normalize -0 --root examples
    """
    from kgr.stages import normalize as norm

    cfg = load_config(
        config_path,
        **{
            "normalize.dedup_threshold": dedup_threshold,
            "normalize.max_file_bytes": max_file_bytes,
            "normalize.workers": workers,
        },
    )
    from_stdin = stdin_paths(paths, null, "normalize")
    paths = paths if from_stdin is None else from_stdin
    counter = Counter("normalize")
    options = norm.NormalizeOptions.from_config(cfg)
    emit(counter.watch(norm.normalize(paths, root=root, options=options)))
    finish(counter)


@cli.command()
@input_argument
@click.option(
    "--max-tokens", type=click.IntRange(16), help="Token budget per chunk (never above the model's maximum input)."
)
@click.option("--overlap", type=click.FloatRange(0, 0.5), help="Share of a chunk repeated at the start of the next.")
@config_option
def chunk(input, max_tokens, overlap, config_path):
    """Split doc records into chunk records sized for the embedder.

    Each doc record is passed on, followed by its chunks; other records pass through.

    \b
    Example:
        kgr normalize examples/ | kgr chunk | jq -c '{doc, ord, tokens}'
    """
    from kgr.stages import chunk as chunking

    cfg = load_config(config_path, **{"chunk.max_tokens": max_tokens, "chunk.overlap": overlap})
    counter = Counter("chunk")
    emit(counter.watch(chunking.chunk(read_input(input, "chunk"), **chunking.options_from_config(cfg))))
    finish(counter)


@cli.command()
@input_argument
@db_option()
@click.option(
    "--prune",
    "prune_root",
    type=click.Path(file_okay=False),
    help="Also purge documents whose files are gone from ROOT.",
)
@config_option
def load(input, db, prune_root, config_path):
    """Store records in the database, one transaction per document.

    Idempotent: a document whose content is unchanged writes nothing; a changed one
    has its rows replaced. Prints a summary on stderr.

    \b
    Example:
        kgr normalize examples/ | kgr chunk | kgr load --db kb.sqlite
    """
    from kgr.stages import load as loading
    from kgr.store.lock import writing

    counter = Counter("load")
    path = resolve_db(db, config_path)
    with writing(path) as store:  # one writer process per database
        summary = loading.load(counter.watch(read_input(input, "load")), store, prune_root=prune_root)
    warn(summary.line())
    finish(counter)


@cli.command()
@input_argument
@db_option()
@click.option("--no-db", is_flag=True, help="Do not read the mined gazetteer from the database.")
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Documents read together: spaCy parses their text in one stream and the relation model decides "
    "their relations in one pass. 1 writes each document's records as soon as it is read.",
)
@config_option
def extract(input, db, no_db, batch, config_path):
    """Find entity mentions and relations in chunk records.

    Each doc record and its chunks pass on, followed by the document's mention and
    relation records, in the order read. The gazetteer mined by `kgr mine` is used when
    the database exists.

    \b
    Example:
        kgr normalize docs/ | kgr chunk | kgr extract --db kb.sqlite | jq -c 'select(.kind=="mention")'
    """
    from kgr.stages import extract as extracting

    cfg = load_config(config_path)
    gazetteer = None
    path = resolve_db(db, config_path)
    if not no_db and os.path.exists(path):
        from kgr.ingest.graphbuild import load_gazetteer
        from kgr.store.lock import reading

        with reading(path) as store:
            gazetteer = load_gazetteer(store)
    extractor = extracting.extractor_from_config(cfg, gazetteer)
    counter = Counter("extract")
    emit(counter.watch(extracting.extract_batched(read_input(input, "extract"), extractor=extractor, batch=batch)))
    finish(counter)


@cli.command()
@input_argument
@db_option()
@click.option("--no-db", is_flag=True, help="Start from no entities instead of the database's.")
@config_option
def link(input, db, no_db, config_path):
    """Link mentions to canonical entities (new entities are created as needed).

    Mention records gain "entity" and "link_score"; relations get entity keys; entity
    records are emitted before the mentions that use them.

    \b
    Example:
        kgr normalize docs/ | kgr chunk | kgr extract | kgr link | kgr load --db kb.sqlite
    """
    from kgr.stages import link as linking

    path = resolve_db(db, config_path)
    entities = []
    if not no_db and os.path.exists(path):
        from kgr.ingest.graphbuild import stored_entities
        from kgr.store.lock import reading

        with reading(path) as store:
            entities = stored_entities(store)
    counter = Counter("link")
    emit(counter.watch(linking.link(read_input(input, "link"), linker=linking.Linker(entities))))
    finish(counter)


@cli.command()
@db_option()
@click.option("--top-k", type=click.IntRange(1), help="Keep at most this many terms.")
@click.option("--min-freq", type=click.IntRange(1), help="Minimum frequency of a name found in running text.")
@json_option
@config_option
def mine(db, top_k, min_freq, as_json, config_path):
    """Mine the gazetteer (names from titles, headings, bold, code) from stored documents.

    \b
    Example:
        kgr mine --db kb.sqlite --json | jq -r .term | head
    """
    from kgr.ingest.graphbuild import mine as mine_terms
    from kgr.store.lock import writing

    cfg = load_config(config_path, **{"extract.gazetteer.mine_topk": top_k, "extract.gazetteer.min_freq": min_freq})

    path = resolve_db(db, config_path)
    with writing(path) as store:  # one writer process per database
        gazetteer = cfg.extract.gazetteer
        terms = mine_terms(store, topk=gazetteer.mine_topk, min_freq=gazetteer.min_freq)
    if as_json:
        emit({"kind": "term", "term": t.term, "type": t.type, "freq": t.freq, "source": t.source} for t in terms)
    else:
        warn(f"mined {len(terms)} terms")


@cli.command()
@click.argument("query")
@db_option()
@click.option("--type", "type_", help="Only entities of this type (PERSON, SERVICE, ...).")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True)
@json_option
@config_option
def entities(query, db, type_, limit, as_json, config_path):
    """Look up entities by name, alias and type, best match first.

    \b
    Example:
        kgr entities "order intake" --db kb.sqlite
    """
    from kgr.retrieval import entities as ents
    from kgr.store.lock import reading

    with reading(resolve_db(db, config_path)) as store:
        hits = ents.lookup(store, query, type_=type_, limit=limit)
    if as_json:
        emit(hits)
        return
    if not hits:
        warn(f"no entity matches {query!r}")
        raise click.exceptions.Exit(ExitStatus.ERROR)
    for h in hits:
        aliases = f"  (also: {', '.join(h['aliases'][:5])})" if h["aliases"] else ""
        click.echo(f"{h['score']:.2f}  {h['name']}  [{h['type']}]{aliases}")


@cli.command()
@click.argument("entity")
@db_option()
@click.option("--hops", type=click.IntRange(0, 3), default=2, show_default=True, help="Depth of the neighbourhood.")
@json_option
@config_option
def explain(entity, db, hops, as_json, config_path):
    """Explain an entity: definition, aliases, relations with evidence, sources, neighbourhood.

    ENTITY is an id, a key, a name or an alias.

    \b
    Example:
        kgr explain "Order Intake Service" --db kb.sqlite
    """
    from kgr.retrieval import entities as ents
    from kgr.store.lock import reading

    with reading(resolve_db(db, config_path)) as store:
        info = ents.explain(store, entity, hops=hops)
    if as_json:
        emit([info])
        return
    out = click.echo
    out(f"{info['name']}  [{info['type']}]  ({info['key']})")
    if info["aliases"]:
        out(f"aliases: {', '.join(info['aliases'])}")
    if info["definition"]:
        out(f"definition: {info['definition']}")
    if info["relations"]:
        out("relations:")
        for r in info["relations"]:
            ev = r["evidence"][0] if r["evidence"] else None
            where = f"  <- {ev['path']}: {ev['sentence'][:100]}" if ev else ""
            out(f"  {r['src_name']} --{r['rel']}--> {r['dst_name']}  ({r['confidence']:.2f}){where}")
    if info["sources"]:
        out("sources:")
        for src in info["sources"]:
            out(f"  {src['path']}  {src['mentions']} mentions  ({src['confidence']:.2f})")
    nodes = [n for n in info["neighbourhood"]["nodes"] if n["distance"] > 0]
    if nodes:
        out(f"neighbourhood ({hops} hops, {info['neighbourhood']['method']}):")
        for n in nodes:
            out(f"  {'  ' * (n['distance'] - 1)}{n['name']}  (distance {n['distance']})")


@cli.command()
@db_option()
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@json_option
@config_option
def review(db, limit, as_json, config_path):
    """List the lowest-confidence entity links and edges, for a person to check.

    \b
    Example:
        kgr review --db kb.sqlite --limit 10
    """
    from kgr.retrieval import entities as ents
    from kgr.store.lock import reading

    with reading(resolve_db(db, config_path)) as store:
        info = ents.review(store, limit=limit)
    if as_json:
        emit([info])
        return
    click.echo("links:")
    for link_ in info["links"]:
        click.echo(f"  {link_['link_score']:.2f}  {link_['surface']!r} -> {link_['entity']}  ({link_['path']})")
    click.echo("edges:")
    for e in info["edges"]:
        click.echo(
            f"  {e['confidence']:.2f}  {e['src']} --{e['rel']}--> {e['dst']}  ({e['path']}: {(e['sentence'] or '')[:80]})"
        )


@cli.command()
@click.argument("source")
@click.argument("target")
@db_option()
@click.option("--max-hops", type=click.IntRange(1, 6), default=4, show_default=True)
@click.option("--rels", help="Comma-separated relation types to follow (default: all).")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True)
@json_option
@config_option
def path(source, target, db, max_hops, rels, limit, as_json, config_path):
    """Shortest typed paths between two entities.

    \b
    Example:
        kgr path "Settlement Engine" "Core Infrastructure" --db kb.sqlite
    """
    from kgr.authoring.nodes import shortest_paths
    from kgr.store.lock import reading

    rel_list = [r.strip() for r in rels.split(",") if r.strip()] if rels else None
    with reading(resolve_db(db, config_path)) as store:
        info = shortest_paths(store, source, target, max_hops=max_hops, rels=rel_list, limit=limit)
    if as_json:
        emit([info])
        return
    if not info["paths"]:
        warn(f"no path between {info['src']['name']} and {info['dst']['name']} within {max_hops} hops")
        raise click.exceptions.Exit(ExitStatus.ERROR)
    for p, strength in zip(info["paths"], info["strengths"]):
        parts = [p[0]["from_name"] if p[0]["forward"] else p[0]["to_name"]]
        for step in p:
            if step["forward"]:
                parts.append(f"--{step['rel']}--> {step['to_name']}")
            else:
                parts.append(f"<--{step['rel']}-- {step['from_name']}")
        click.echo(" ".join(parts) + f"  (strength {strength['final_strength']:.3f})")


@cli.command()
@click.argument("node")
@db_option()
@click.option("--template", "template_ref", help="Render with this template instead of the node's own.")
@click.option("--force", is_flag=True, help="Render again even when the cached document is still valid.")
@click.option("--no-cache", is_flag=True, help="Do not store the rendered document in the cache.")
@json_option
@config_option
def render(node, db, template_ref, force, no_cache, as_json, config_path):
    """Render a node's document from its template (cached until what it depends on changes).

    NODE is a node id or name (exact, else the closest name).

    \b
    Example:
        kgr render "Vehicle Locator Service" --db kb.sqlite
    """
    from kgr.authoring import templates as tm
    from kgr.store.lock import WriterBusy, reading, writing

    path = resolve_db(db, config_path)
    _migrate_for_templates(path)
    with reading(path) as store:
        docs, writes = tm.generate(store, [node], force=force, template=template_ref)
    doc = docs[0]
    if doc["status"] != "success":
        raise KgrError(doc["message"])
    if writes and not no_cache:
        try:
            with writing(path) as store, store.write():
                tm.store_cache(store, writes)
        except WriterBusy as exc:
            warn(f"kgr render: not cached: {exc.message}")
    if as_json:
        emit([doc])
    else:
        click.echo(doc["content"], nl=not doc["content"].endswith("\n"))


def _migrate_for_templates(path: str) -> None:
    """Bring an older database up to the template schema (a read-only open cannot)."""
    from kgr.store import migrations
    from kgr.store.lock import reading, writing

    with reading(path) as store:
        current = store.user_version >= migrations.LATEST
    if not current:
        with writing(path):
            pass


@cli.group(name="template")
def template_group():
    """Manage document templates (Mustache bodies with read-only SQL variables).

    \b
    Example:
        kgr template add person --body person.mustache --var 'teams=SELECT t.name FROM relations r JOIN entities t ON t.id = r.dst_id WHERE r.src_id = :id' --db kb.sqlite
    """


@template_group.command(name="add")
@click.argument("name")
@click.option(
    "--body", "body_file", type=click.File("r"), required=True, help="The Mustache body (a file; - for stdin)."
)
@click.option(
    "--var",
    "variables",
    multiple=True,
    metavar="NAME=SQL",
    help="A variable: one read-only SELECT; :id, :name, :type and :key are the node's. Repeatable.",
)
@click.option("--type", "node_types", multiple=True, help="Node types this template is for. Repeatable.")
@click.option("--description", help="What the template is for.")
@click.option("--replace", is_flag=True, help="Replace a template of this name.")
@db_option()
@config_option
def template_add(name, body_file, variables, node_types, description, replace, db, config_path):
    """Add (or with --replace, update) a template; its queries are checked in the sandbox first.

    The body may include other templates by name as partials ({{> name}}); each must exist,
    and partials that form a cycle are refused.

    \b
    Example:
        kgr template add service --body service.mustache --type SERVICE --var 'deps=SELECT ...' --db kb.sqlite
    """
    from kgr.authoring import templates as tm
    from kgr.store.lock import writing

    vars_ = dict(tm.parse_var(v) for v in variables)
    body = body_file.read()
    path = resolve_db(db, config_path)
    with writing(path) as store, store.write():
        saved = tm.save_template(
            store,
            name=name,
            structure=body,
            variables=vars_,
            description=description,
            node_types=list(node_types) or None,
            create=True,
            update=replace,
        )
    emit([{"kind": "template", "id": saved["id"], "name": saved["name"], "variables": sorted(saved["variables"])}])


@template_group.command(name="list")
@db_option()
@json_option
@config_option
def template_list(db, as_json, config_path):
    """List the templates: name, node types and variables.

    \b
    Example:
        kgr template list --db kb.sqlite
    """
    from kgr.authoring import templates as tm
    from kgr.store.lock import reading

    path = resolve_db(db, config_path)
    _migrate_for_templates(path)
    with reading(path) as store:
        items = tm.list_templates(store)
    if as_json:
        emit([{"kind": "template", **t} for t in items])
        return
    for t in items:
        types = ",".join(t["node_types"]) or "-"
        click.echo(f"{t['name']}\t{types}\t{','.join(sorted(t['variables'])) or '-'}")


@template_group.command(name="rm")
@click.argument("name")
@db_option()
@config_option
def template_rm(name, db, config_path):
    """Remove a template and its cached documents (the default template stays).

    \b
    Example:
        kgr template rm person --db kb.sqlite
    """
    from kgr.authoring import templates as tm
    from kgr.store.lock import writing

    path = resolve_db(db, config_path)
    with writing(path) as store, store.write():
        out = tm.delete_template(store, name)
    emit([{"kind": "template_removed", **out}])


def model_overrides(model: str | None) -> dict:
    """--model NAME or --model PATH (a local sentence-transformers folder)."""
    if not model:
        return {}
    if os.path.isdir(model):
        return {"embed.model_path": model}
    return {"embed.model": model, "embed.model_path": None}


@cli.command()
@input_argument
@db_option()
@click.option("--model", help="Embedding model: a name, or the path of a local sentence-transformers model.")
@click.option("--batch-size", type=click.IntRange(1, 4096), help="Texts per model call.")
@click.option("--pending", is_flag=True, help="Read no records: embed what the database lacks, in place.")
@click.option("--reembed", is_flag=True, help="With --pending: drop every vector first (after changing the model).")
@config_option
def embed(input, db, model, batch_size, pending, reembed, config_path):
    """Add vectors to chunk and entity records (a filter), or to a database.

    As a filter, chunk and entity records gain `embedding` (base64 float32), `model` and
    `dim`, and chunk records `sentence_vectors` (base64 int8, a row per sentence, each read
    after its document's title: what `kgr query` scores a chunk by against a question); other
    records pass through. With --db, vectors already in that database's cache
    are reused. With --pending, the database itself is brought up to date.

    \b
    Example:
        kgr normalize docs/ | kgr chunk | kgr embed | kgr load --db kb.sqlite
        kgr embed --db kb.sqlite --pending --reembed --model /models/embeddinggemma
    """
    from kgr.store.lock import writing

    cfg = load_config(config_path, **{"embed.batch_size": batch_size, **model_overrides(model)})
    if reembed and not pending:
        raise click.UsageError("--reembed needs --pending (it rewrites the database's vectors)")
    if pending:
        from kgr.ingest import pipeline
        from kgr.store import vectors

        path = resolve_db(db, config_path)
        with writing(path) as store:  # one writer process per database
            if reembed:
                vectors.drop_all(store)
            before = vectors.sentence_chunks(store)
            n = pipeline.embed_store(store, cfg)
            added = vectors.sentence_chunks(store) - before
        warn(f"embedded {n} chunks and entities" + (f", and the sentences of {added} chunks" if added > 0 else ""))
        return
    from kgr.embedders import get_embedder
    from kgr.stages.embed import embed as embed_stage
    from kgr.store import Store

    counter = Counter("embed")
    embedder = get_embedder(cfg, purpose="document")
    store = Store(db) if db else None
    try:
        recs = counter.watch(read_input(input, "embed"))
        emit(embed_stage(recs, embedder, batch_size=cfg.embed.batch_size, store=store, sentences=cfg.embed.sentences))
    finally:
        if store is not None:
            store.close()
    finish(counter)


@cli.command()
@click.argument("text")
@db_option()
@click.option("--k", "k", type=click.IntRange(1, 200), help="How many results [default: retrieval.k].")
@click.option("--hops", type=click.IntRange(0, 4), help="Graph expansion depth [default: retrieval.hops].")
@click.option("--rels", help="Comma-separated relation types to expand over [default: retrieval.rels].")
@click.option("--mode", type=click.Choice(["bm25", "vector", "hybrid", "graph"]), default="graph", show_default=True)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    help="Only results of documents with this tag (from ingest_docs or front matter; repeatable: all of them).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per result (JSON Lines).")
@config_option
def query(text, db, k, hops, rels, mode, tags, as_json, config_path):
    """Ask the knowledge base: ranked chunks with their path, section, snippet and why.

    \b
    Example:
        kgr query "who owns the ledger service" --db kb.sqlite
        kgr query "retention of settlement records" --mode hybrid --json | jq .path
    """
    from kgr.retrieval import query as query_mod
    from kgr.store.lock import reading

    cfg = load_config(config_path)
    rel_list = [x.strip() for x in rels.split(",") if x.strip()] if rels else None
    with reading(resolve_db(db, config_path)) as store:
        embed_query = query_mod.query_embedder(store, cfg) if mode != "bm25" else None
        result = query_mod.query_with_settings(
            store,
            text,
            cfg.retrieval,
            k=k,
            hops=hops,
            rels=rel_list,
            mode=mode,
            embed_query=embed_query,
            tags=list(tags) or None,
        )
    if as_json:
        emit([{"kind": "result", "query": text, "mode": mode, **row} for row in result["results"]])
    else:
        click.echo(query_mod.format_results(result))


# -- memories (seed 003): remember, recall, kgr memories ------------------------------


def _as_of_ms(value: str | None) -> int | None:
    """--as-of: milliseconds since 1970, or an ISO date/time (UTC unless it says otherwise)."""
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    from datetime import datetime, timezone

    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither milliseconds nor an ISO date", param_hint="--as-of") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


@cli.command()
@click.argument("text")
@db_option()
@click.option(
    "--importance",
    type=click.FloatRange(0, 1),
    help="How much it matters, 0 to 1 [default: memory.default_importance].",
)
@click.option("--tag", "tags", multiple=True, help="A label (repeatable).")
@click.option("--source", "label", help="Where the memory came from (conversation, import, ...).")
@json_option
@config_option
def remember(text, db, importance, tags, label, as_json, config_path):
    """Store a memory: chunked, extracted, linked and embedded like a document.

    TEXT - reads stdin. The same text twice is one memory.

    \b
    Example:
        kgr remember "Alice moved to Berlin in May" --importance 0.8 --tag people --db kb.sqlite
    """
    from kgr.memory import recall
    from kgr.store.lock import writing

    if text == "-":
        text = sys.stdin.read()
    cfg = load_config(config_path)
    path = resolve_db(db, config_path)
    with writing(path) as store:  # one writer process per database
        out = recall.remember(store, text, cfg, importance=importance, tags=list(tags), label=label)
    if as_json:
        emit([{"kind": "memory", **out}])
    else:
        names = ", ".join(e["name"] for e in out["entities"]) or "none"
        click.echo(
            f"{'remembered' if out['created'] else 'already remembered'} {out['id']} "
            f"(importance {out['importance']:g}; entities: {names})"
        )


@cli.command()
@click.argument("query")
@db_option()
@click.option("--k", "k", type=click.IntRange(1, 100), default=5, show_default=True, help="How many memories.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable: all of them).")
@click.option(
    "--as-of",
    help="Recall as of this time (ISO date or milliseconds): later memories and observations closed by then are left out.",
)
@click.option("--history", "include_history", is_flag=True, help="Follow observations no longer valid too.")
@click.option(
    "--graph/--no-graph",
    default=True,
    show_default=True,
    help="Also follow entities named in the query to their memories.",
)
@click.option(
    "--touch/--no-touch",
    default=True,
    show_default=True,
    help="Count an access of each memory returned (--no-touch reads only, beside a running writer).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per memory (JSON Lines).")
@config_option
def recall(query, db, k, tags, as_of, include_history, graph, touch, as_json, config_path):
    """Recall the memories that best answer QUERY, weighted by recency, importance and use.

    \b
    Example:
        kgr recall "where does Alice live" --db kb.sqlite
        kgr recall "deploys" --tag ops --json | jq -r .text
    """
    from kgr.memory import recall as recall_mod
    from kgr.retrieval import query as query_mod
    from kgr.store.lock import reading, writing

    cfg = load_config(config_path)
    path = resolve_db(db, config_path)
    when = _as_of_ms(as_of)
    if not os.path.exists(path):
        from kgr.errors import StoreError

        raise StoreError(f"database not found: {path}", hint="store a memory first: kgr remember TEXT --db PATH")

    def run(store):
        return recall_mod.recall(
            store,
            query,
            cfg,
            k=k,
            embed_query=query_mod.query_embedder(store, cfg),
            include_graph=graph,
            as_of=when,
            include_history=include_history,
            tags=list(tags),
            touch=touch,
        )

    if touch:
        from kgr.store.lock import WriterBusy

        try:
            with writing(path) as store:
                out = run(store)
        except WriterBusy as exc:
            exc.hint = "pass --no-touch to recall without counting accesses, or " + (exc.hint or "retry later")
            raise
    else:
        with reading(path) as store:
            out = run(store)
    if as_json:
        emit([{"kind": "recall", "query": query, **r} for r in out["results"]])
    elif not out["results"]:
        click.echo("no memories")
    else:
        for r in out["results"]:
            click.echo(f"{r['rank']:>2}. {r['id']}  [{r['score']:.4f}]  {query_mod.snippet(r['text'])}")
            click.echo(f"    why: {r['why']}; importance {r['importance']:g}, recalled {r['access_count']}x")


@cli.group(name="memories")
def memories_group():
    """Manage stored memories: consolidate, history, export, import."""


@memories_group.command(name="consolidate")
@db_option()
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1, min_open=True),
    help="Cosine similarity from which two memories merge [default: memory.consolidate_threshold, 0.9].",
)
@click.option("--dry-run", is_flag=True, help="Only report what would merge.")
@json_option
@config_option
def memories_consolidate(db, threshold, dry_run, as_json, config_path):
    """Merge near-duplicate memories, keeping their provenance.

    Each group keeps one memory with the largest importance, the summed access counts,
    all tags, and the merged memories whole (their ids and texts) in merged_from.

    \b
    Example:
        kgr memories consolidate --dry-run --db kb.sqlite
    """
    from kgr.memory import recall
    from kgr.store.lock import writing

    cfg = load_config(config_path)
    path = resolve_db(db, config_path)
    with writing(path) as store:
        out = recall.consolidate(store, cfg, threshold=threshold, dry_run=dry_run)
    if as_json:
        emit([{"kind": "summary", **out}])
    else:
        for m in out["merged"]:
            click.echo(f"{m['into']} <- {', '.join(m['from'])}")
        warn(
            f"{'would merge' if dry_run else 'merged'} {out['absorbed']} memories into {out['groups']} "
            f"(threshold {out['threshold']:g})"
        )


@memories_group.command(name="history")
@click.argument("entity")
@db_option()
@click.option("--as-of", help="Only observations valid at this time (ISO date or milliseconds).")
@config_option
def memories_history(entity, db, as_of, config_path):
    """An entity's observations with their validity (JSON Lines), oldest first.

    \b
    Example:
        kgr memories history "Alice Johnson" --db kb.sqlite
    """
    from kgr.memory import recall
    from kgr.store.lock import reading

    when = _as_of_ms(as_of)
    with reading(resolve_db(db, config_path)) as store:
        out = recall.history(store, entity, as_of=when, include_history=when is None)
    emit([{"kind": "observation", "entity": out["entity"]["name"], **o} for o in out["observations"]])


@memories_group.command(name="export")
@db_option()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    help="Write to FILE instead of stdout.",
)
@config_option
def memories_export(db, output, config_path):
    """Write every memory, with its attributes and observations, as JSON Lines.

    \b
    Example:
        kgr memories export --db kb.sqlite -o memories.jsonl
    """
    from kgr.memory import recall
    from kgr.store.lock import reading

    with reading(resolve_db(db, config_path)) as store:
        data = recall.export_jsonl(store)
    if output == "-":
        sys.stdout.buffer.write(data)
    else:
        tmp = f"{output}.tmp{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, output)
    count = data.count(b"\n")
    warn(f"exported {count} memories" + ("" if output == "-" else f" to {output}"))


@memories_group.command(name="import")
@input_argument
@db_option()
@json_option
@config_option
def memories_import(input, db, as_json, config_path):
    """Read memories exported by `kgr memories export`; those already stored are skipped.

    The whole file is checked before anything is written.

    \b
    Example:
        kgr memories import memories.jsonl --db other.sqlite
    """
    from kgr.memory import recall
    from kgr.store.lock import writing

    cfg = load_config(config_path)
    recs = recall.parse_jsonl(input.read())
    path = resolve_db(db, config_path)
    with writing(path) as store:
        out = recall.import_records(store, recs, cfg)
    if as_json:
        emit([{"kind": "summary", **out}])
    else:
        warn(f"imported {out['imported']} memories, {out['skipped']} already stored")


golden_folders_option = click.option(
    "--golden",
    "goldens",
    required=True,
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="Annotated folder with docs/ and annotations/ (repeat for several).",
)


def weights_out_option(own: str):
    """The --out option of a `kgr train` command; ``own`` is the file kgr ships."""
    ext = own.rsplit(".", 1)[-1]
    return click.option(
        "--out",
        required=True,
        type=click.Path(dir_okay=False),
        help=f"Where to write the weights (.{ext}); kgr's own are {own}.",
    )


@cli.group(name="train")
def train_group():
    """Train kgr's learned models from annotated folders (the format of a golden corpus)."""


@train_group.command(name="relations")
@golden_folders_option
@weights_out_option("kgr/stages/models/relations.npz")
@click.option("--C", "c", type=float, default=None, help="Inverse regularisation strength (default: the module's).")
@click.option(
    "--reader/--no-reader",
    default=False,
    help="Also fine-tune a pair reader (the default model's transformer, through small adapters) on the "
    "marked evidence, a third opinion beside the sparse model and the dense head: 11 to 17 minutes per fit on "
    "two cores, nine fits.",
)
@json_option
@config_option
def train_relations(goldens, out, c, reader, as_json, config_path):
    """Fit the relation classifier on annotated folders and write its weights.

    Each folder is ingested into a scratch database (no vectors); the candidates extraction
    makes are labelled from annotations/relations.jsonl and read in context by the default
    embedding model (the dense head learns from that view). The decision thresholds are chosen
    on documents left out of training (5-fold by document, and each folder left out when
    there are several); where that makes no measured difference, the model adds no relation
    of its own. A folder whose annotations/scope.json names the relation types it annotates
    teaches only those: a pair it leaves unrelated may still hold one of the others. A
    relation's confidence is what its probability meant on those left-out documents (how often
    such a relation held), fitted apart for what a rule states and what the model adds alone.
    Deterministic: the same folders give the same weights.

    \b
    Example:
        kgr train relations --golden ../shared/golden --golden ../shared/golden2 \\
            --golden ../shared/eval/redocred_dev --out kgr/stages/models/relations.npz
    """
    import shlex
    import sys

    from kgr.learn import relations as learn

    cfg = load_config(config_path)
    kwargs = {} if c is None else {"C": c}
    command = "kgr train relations " + " ".join(shlex.quote(a) for a in sys.argv[sys.argv.index("relations") + 1 :])
    summary = learn.train(
        goldens, out, config=cfg, reader=reader, log=None if as_json else warn, command=command, **kwargs
    )
    if as_json:
        emit([{"kind": "summary", "out": out, **summary}])
    else:
        warn(f"wrote {out}: {summary['features']} features, threshold {summary['threshold']}")


@train_group.command(name="types")
@golden_folders_option
@weights_out_option("kgr/stages/models/types.json")
def train_types(goldens, out):
    """Fit the entity-type model on annotated folders and write its weights.

    \b
    Example:
        kgr train types --golden ../shared/golden --golden ../shared/golden2 \\
            --out kgr/stages/models/types.json
    """
    from kgr.eval import typetrain

    args = ["train", *[a for g in goldens for a in ("--golden", g)], "--out", out]
    if typetrain.main(args) != 0:
        raise click.exceptions.Exit(1)


@cli.group(name="eval")
def eval_group():
    """Measure extraction and retrieval quality against annotated data."""


@eval_group.command(name="extraction")
@click.option(
    "--golden", required=True, type=click.Path(exists=True, file_okay=False), help="Folder with docs/ and annotations/."
)
@click.option(
    "--db", type=click.Path(dir_okay=False), help="Keep the scratch database here (default: a temporary file)."
)
@json_option
@config_option
def eval_extraction(golden, db, as_json, config_path):
    """Precision, recall and F1 of mentions, canonical entities and relations, and entity typing.

    Typing is the type of the entity each correctly found mention is linked to against the
    gold entity's type (a confusion table in the text output). When annotations/scope.json
    exists, relations are scored only for its relation_types and between gold entities of its
    entity_types, and dates and versions are not counted as mentions unless it lists them.

    \b
    Example:
        kgr eval extraction --golden ../shared/golden --json | jq .relation.f1
    """
    from kgr.eval import extraction as evaluate

    result = evaluate.eval_extraction(golden, db=db, config=load_config(config_path))
    if as_json:
        emit([result])
    else:
        click.echo(evaluate.format_table(result))


@eval_group.command(name="retrieval")
@click.option(
    "--dataset",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="An eval folder (corpus.json + gold.json), a BEIR folder, or a golden folder.",
)
@click.option(
    "--db",
    required=True,
    type=click.Path(dir_okay=False),
    help="The database to query; ingested from the dataset's corpus when it does not exist.",
)
@click.option("--modes", default="bm25,vector,hybrid,graph", show_default=True, help="Comma-separated retrieval modes.")
@click.option("--split", default="test", show_default=True, help="BEIR qrels split.")
@click.option("--limit", type=click.IntRange(1), help="Ask only the first N questions.")
@progress_option
@json_option
@config_option
def eval_retrieval(dataset, db, modes, split, limit, progress, as_json, config_path):
    """Recall@2/5/10, MRR@10 and nDCG@10 of each retrieval mode, side by side.

    \b
    Example:
        kgr eval retrieval --dataset ../shared/eval/hotpotqa_dev200 --db /tmp/hotpot.sqlite --json
    """
    from kgr.eval import retrieval as evalret

    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    bad = [m for m in mode_list if m not in ("bm25", "vector", "hybrid", "graph")]
    if bad or not mode_list:
        raise click.BadParameter(
            f"unknown mode {', '.join(bad) or '(none)'}; choose from bm25, vector, hybrid, graph", param_hint="--modes"
        )
    cfg = load_config(config_path)
    ds = evalret.load_dataset(dataset, split=split)
    show = sys.stderr.isatty() if progress is None else progress
    evalret.ensure_database(ds, db, cfg, progress=show)
    rows = evalret.evaluate(ds, db, cfg, modes=mode_list, limit=limit)
    if as_json:
        emit([{k: v for k, v in row.items()} for row in rows])
    else:
        click.echo(evalret.format_table(ds.name, rows))


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@db_option()
@root_option
@click.option("--prune/--no-prune", default=True, show_default=True, help="Purge documents whose files are gone.")
@progress_option
@graph_option
@embed_option
@null_option
@click.option(
    "--engine",
    type=click.Choice(["local", "processes", "ray"]),
    default="processes",
    show_default=True,
    help="Where the per-document work runs: this process (local); the extract step in one worker process "
    "per core when there is more than one batch of documents to extract (processes); or normalize, chunk, "
    "extract and embed as Ray tasks (ray, pip install 'kgr[ray]'). This process writes either way, and the "
    "database is the same.",
)
@click.option(
    "--address",
    metavar="ADDR",
    help="With --engine ray: the Ray cluster to use (e.g. auto, or ray://host:10001); "
    "by default a local one is started for the run.",
)
@json_option
@config_option
def ingest(paths, db, root, prune, progress, graph, embed, null, engine, address, as_json, config_path):
    """Normalize, chunk, load, extract, link and embed files in one process.

    The same stage functions as the filters, chained without serialization: changed
    files are normalized, chunked and loaded; then documents without a current graph
    are extracted and linked (against what is mined from the whole corpus); then chunks
    and entities without a vector are embedded. Unchanged files (same mtime and size,
    else same hash) are skipped before parsing, so it is cheap to run from cron. PATHS - reads the paths from stdin, one per line,
    or NUL-terminated with -0.

    \b
    Example:
        kgr ingest examples/ --db kb.sqlite
        find examples -name '*.md' -print0 | kgr ingest -0 - --root examples --db kb.sqlite
        kgr ingest docs/ --db kb.sqlite --engine ray --address auto
    """
    from kgr.ingest import engine as engines
    from kgr.ingest import pipeline
    from kgr.store.lock import writing

    cfg = load_config(config_path)
    paths = stdin_paths(paths, null, "ingest") if list(paths) == ["-"] or null else paths
    if not paths:
        raise click.UsageError("no paths were read from stdin")
    show = sys.stderr.isatty() if progress is None else progress
    path = resolve_db(db, config_path)
    # One writer process per database: refused at once while `kgr watch` (or another ingest) runs.
    if address and engine != "ray":
        raise click.UsageError("--address needs --engine ray")
    with writing(path) as store:
        runner = engines.make(engine, address)
        try:
            summary = pipeline.ingest(
                paths,
                store,
                root=root,
                config=cfg,
                prune=prune,
                progress=show,
                graph=graph,
                embed=embed,
                on_error=lambda r: warn(error_line(r)),
                on_partial=lambda r: warn(partial_line(r)),
                engine=runner,
            )
        finally:
            runner.close()
        pipeline.record_run(store, summary)  # for status: this run's rate and transaction times
    if as_json:
        emit([summary.as_dict()])
    else:
        warn(summary.line())
    if summary.failed or summary.extract_failed:
        raise click.exceptions.Exit(ExitStatus.ERROR)


@cli.command()
@db_option()
@click.option("--wait-idle", is_flag=True, help="First wait until the writer (kgr watch) is idle, or none runs.")
@click.option(
    "--timeout",
    type=click.FloatRange(0),
    default=60,
    show_default=True,
    help="With --wait-idle: give up (exit 1) after this many seconds.",
)
@json_option
@config_option
def status(db, wait_idle, timeout, as_json, config_path):
    """Show what the database holds: counts, last file, last error, versions, the writer, metrics.

    A database that does not exist yet (or a 0-byte file) is created empty, with the
    full schema, and reported as empty, when its path is given (--db, KGR_DB or
    sqlite.path; not the bare default kgr.sqlite); its folder must exist. The project id
    (project in the config) is stamped in a new database. Metrics: the writer's queue
    depth, ingest rate and write transaction times, vector count, orphaned entities,
    free pages.

    With --wait-idle, first wait until its writer has nothing queued, running or
    pending (or no writer runs), and for the database to appear if it does not exist
    yet (it is not created then): scripts and tests wait on this, never on sleep.

    \b
    Example:
        kgr status --db kb.sqlite --json | jq .counts
        kgr status --db kb.sqlite --wait-idle --timeout 30
    """
    from kgr.retrieval import status as status_mod
    from kgr.store.lock import reading

    path = resolve_db(db, config_path)
    if wait_idle:
        from kgr.ingest.writer import wait_for_idle

        idle, info = wait_for_idle(path, timeout)
        if not idle and not os.path.exists(path):
            raise KgrError(
                f"{path} still does not exist after {timeout:g}s",
                hint=f"start the writer that makes it (`kgr watch DIR --db {path}` or "
                f"`kgr ingest DIR --db {path}`), or raise --timeout",
            )
        if not idle:
            what = (
                (
                    f"queue {info.get('queue_depth', 0)}, pending {info.get('pending', 0)}, "
                    f"last file {info.get('last_file') or '-'}"
                )
                if info
                else "no state published yet"
            )
            raise KgrError(
                f"the writer of {path} is still busy after {timeout:g}s ({what})",
                hint="raise --timeout, or see `kgr status` for its last error",
            )
    elif named_db(db, config_path):
        from kgr.store.lock import create_if_missing

        create_if_missing(path, project=load_config(config_path).project)
    elif not os.path.exists(path):
        from kgr.errors import StoreError

        raise StoreError(
            f"database not found: {path}",
            hint=f"pass --db PATH (`kgr status --db {path}` creates an empty one), or build one: kgr ingest DIR --db PATH",
        )
    with reading(path) as store:
        info = status_mod.status(store, project=load_config(config_path).project)
    if as_json:
        emit([info])
    else:
        status_mod.print_status(info)


@cli.command()
@db_option()
@json_option
@config_option
def vacuum(db, as_json, config_path):
    """Give the database's free pages back to the file system.

    Databases made by this kgr free pages by themselves (auto_vacuum=INCREMENTAL: after a
    write that leaves many free pages, such as purging documents). A database made before
    that is converted once, by a full VACUUM: it rewrites the file, needs as much free
    disk as the file takes, and holds the writer lock meanwhile (not while kgr watch runs).

    \b
    Example:
        kgr vacuum --db kb.sqlite
    """
    from kgr.store.lock import writing

    with writing(resolve_db(db, config_path)) as store:
        report = store.vacuum()
    if as_json:
        emit([report])
    else:
        before, after = report["before"], report["after"]
        warn(
            f"{report['db']}: {before['bytes']} -> {after['bytes']} bytes, free pages {before['freelist_count']} -> "
            f"{after['freelist_count']}" + ("; converted to auto_vacuum=incremental" if report["converted"] else "")
        )


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
@db_option()
@click.option(
    "--debounce-ms",
    type=click.IntRange(0, 60000),
    help="Quiet time a path needs before it is looked at [default: watch.debounce_ms, 300].",
)
@click.option(
    "--scan-interval",
    type=click.FloatRange(0),
    default=600,
    show_default=True,
    help="Seconds between full reconciling scans (0: only at start-up and after lost events).",
)
@click.option(
    "--polling",
    is_flag=True,
    help="Poll the folder every second instead of using inotify (network or FUSE filesystems).",
)
@graph_option
@embed_option
@config_option
def watch(directory, db, debounce_ms, scan_interval, polling, graph, embed, config_path):
    """Keep DIRECTORY ingested into the database as files change, until stopped.

    Reconciles the folder at start-up, then follows file events: saves, renames (rows and
    vectors move, nothing is re-embedded), deletes. Editor temporary files, dotfiles and
    .kgrignore patterns are ignored. The only writer of the database while it runs:
    `kgr ingest` on it is refused. Logs go to stderr, stdout stays empty. SIGTERM stops
    it (exit 0), Ctrl-C too (exit 130). Wait for quiet with `kgr status --wait-idle`.

    \b
    Example:
        kgr watch examples/kb --db kb.sqlite
    """
    import logging
    import threading

    from kgr.ingest import watch as watch_mod

    if not os.path.isdir(directory):
        raise click.BadParameter(f"{directory}: no such directory", param_hint="DIRECTORY")
    cfg = load_config(config_path, **{"watch.debounce_ms": debounce_ms})
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    for name in ("kgr.watch", "kgr.writer"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started from a shell that ignores it
    watch_mod.watch(
        directory,
        resolve_db(db, config_path),
        config=cfg,
        debounce_ms=cfg.watch.debounce_ms,
        scan_interval=scan_interval or None,
        embed=embed,
        graph=graph,
        stop=stop,
        polling=polling,
    )


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
@db_option()
@click.option(
    "--fix",
    is_flag=True,
    help="Re-ingest what differs and finish incomplete documents (takes the writer lock: not while kgr watch runs).",
)
@click.option(
    "--graph/--no-graph",
    default=True,
    show_default=True,
    help="Expect every document to have its graph (with --fix: build it).",
)
@click.option(
    "--embed/--no-embed",
    default=True,
    show_default=True,
    help="Expect every chunk to have its vector (with --fix: embed it).",
)
@json_option
@config_option
def verify(directory, db, fix, graph, embed, as_json, config_path):
    """Check the database against DIRECTORY by re-hashing every file; exit 1 if they differ.

    Finds what the mtime-and-size fast path cannot (an edit with its times restored):
    files missing from the database, documents whose file is gone, stale hashes; then
    chunks without full-text rows or with orphan vectors, and SQLite's integrity checks;
    then documents left incomplete (no graph or no vectors, as after an interrupted
    ingest) and those whose extraction failed.

    \b
    Example:
        kgr verify examples/kb --db kb.sqlite --fix
    """
    from kgr.ingest import verify as verify_mod
    from kgr.store.lock import reading, writing

    if not os.path.isdir(directory):
        raise click.BadParameter(f"{directory}: no such directory", param_hint="DIRECTORY")
    path = resolve_db(db, config_path)
    cfg = load_config(config_path)
    allow = cfg.security.allowlist
    with reading(path) as store:
        report = verify_mod.check(store, directory, graph=graph, embed=embed, allowlist=allow)
    if fix and not report["ok"]:
        with writing(path) as store:
            summary = verify_mod.fix(
                store,
                directory,
                report,
                config=cfg,
                graph=graph,
                embed=embed,
                on_error=lambda r: warn(error_line(r)),
                on_partial=lambda r: warn(partial_line(r)),
            )
            report["fixed"] = summary.as_dict()
            after = verify_mod.check(store, directory, graph=graph, embed=embed, allowlist=allow)
        report["after"] = {k: after[k] for k in ("ok", "missing", "extra", "stale", "incomplete", "extract_failed")}
    if as_json:
        emit([report])
    else:
        for name in ("missing", "extra", "stale"):
            for p in report[name]:
                click.echo(f"{name}\t{printable(p)}")
        for item in report["incomplete"]:
            click.echo(f"incomplete\t{printable(item['path'])}\tno {' and no '.join(item['missing'])}")
        for item in report["extract_failed"]:
            click.echo(f"failed\t{printable(item['path'])}\t{printable(item['error'] or 'extraction failed')}")
        idx, sto = report["index"], report.get("storage", {})
        if not idx["ok"]:
            click.echo(
                f"index\t{idx['chunks']} chunks, {idx['fts_rows']} full-text rows, {idx['fts_orphans']} full-text "
                f"and {idx['vec_orphans']} vector orphans"
            )
        if sto and not sto["ok"]:
            click.echo(
                f"storage\t{'; '.join(sto['integrity_check'])}, {sto['foreign_key_errors']} foreign key errors, "
                f"FTS: {sto['fts_integrity']}"
            )
        warn(
            f"{report['files']} files, {report['docs']} documents: "
            + (
                "consistent"
                if report["ok"]
                else f"{len(report['missing'])} missing, {len(report['extra'])} extra, "
                f"{len(report['stale'])} stale, {len(report['incomplete'])} incomplete, "
                f"{len(report['extract_failed'])} failed extraction"
            )
            + (
                f"; fixed: {report['fixed']['ingested']} ingested, {report['fixed']['pruned']} purged, "
                f"{report['fixed']['extracted']} graphed, {report['fixed']['embedded']} vectors"
                if "fixed" in report
                else ""
            )
        )
        if not report["ok"] and not fix and (report["incomplete"] or report["extract_failed"]):
            warn(
                f"hint: `kgr verify {printable(directory)} --db {printable(str(path))} --fix` builds the missing graphs "
                "and vectors and tries failed extractions again"
            )
    still = report.get("after", report)
    if not still["ok"]:
        raise click.exceptions.Exit(ExitStatus.ERROR)


@cli.command()
@db_option()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8766,
    show_default=True,
    help="Port on 127.0.0.1 (0: any free port).",
)
@click.option(
    "--open/--no-open",
    "open_browser",
    default=True,
    show_default=True,
    help="Open the page in the default web browser.",
)
@config_option
def viz(db, port, open_browser, config_path):
    """Serve a live page of the knowledge graph on 127.0.0.1.

    The page starts from the most connected entities, a search or one entity, grows the
    neighbourhood of each node clicked, shows its details (aliases, observations,
    relations, source snippets) and polls for changes every 2 s. Nothing leaves the
    machine: the page's JavaScript (vis-network) comes with the pyvis package.

    \b
    Example:
        kgr viz --db kb.sqlite --port 8766 --no-open
    """
    import webbrowser

    from kgr import viz as viz_mod

    server = viz_mod.make_server(resolve_db(db, config_path), port=port)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C stops it even when started in the background
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(ExitStatus.OK))
    try:
        warn(f"kgr viz: serving {server.url} (Ctrl-C to stop)")
        if open_browser:
            webbrowser.open(server.url)
        server.serve_forever()
    finally:
        server.server_close()


def _export_formats() -> list[str]:
    from kgr.export import FORMATS

    return sorted(FORMATS)


@cli.command(name="export")
@db_option()
@click.option("--format", "fmt", type=click.Choice(_export_formats()), required=True, help="Output format.")
@click.option(
    "-o",
    "--output",
    type=click.Path(allow_dash=True),
    default="-",
    help="Write to FILE instead of stdout (neo4j: the directory to write its files into).",
)
@click.option("--type", "types", multiple=True, help="Only entities of this type (repeatable, or comma-separated).")
@click.option("--rel", "rels", multiple=True, help="Only relations of this kind (repeatable, or comma-separated).")
@config_option
def export_cmd(db, fmt, output, types, rels, config_path):
    """Write the knowledge graph as GraphML, DOT, Mermaid, mcp-memory, Neo4j import CSV or a Cypher script.

    graphml for Gephi and networkx, dot for Graphviz, mermaid for Markdown; neo4j writes neo4j-admin
    import CSV files and import.sh into the directory -o names; cypher is UNWIND ... MERGE batches
    that Neo4j and Memgraph run.

    \b
    Example:
        kgr export --format graphml --db kb.sqlite -o kb.graphml
        kgr export --format mermaid --db kb.sqlite --type SERVICE,TEAM --rel owned_by
        kgr export --format neo4j --db kb.sqlite -o kb-neo4j/
        kgr export --format cypher --db kb.sqlite -o kb.cypher
    """
    import shutil
    from pathlib import Path

    from kgr import export as export_mod
    from kgr.errors import UsageError
    from kgr.store.lock import reading

    def split(values):
        return {v.strip() for value in values for v in value.split(",") if v.strip()} or None

    directory = export_mod.FORMATS[fmt].directory
    if directory and output == "-":
        raise UsageError(f"--format {fmt} writes several files", hint="name a directory for them with -o DIR")
    if not directory and os.path.isdir(output):
        raise UsageError(f"{output} is a directory", hint=f"--format {fmt} writes one file: name it with -o FILE")
    if directory and os.path.exists(output) and (not os.path.isdir(output) or os.listdir(output)):
        raise UsageError(f"{output} exists and is not an empty directory", hint="name a new or empty directory")
    with reading(resolve_db(db, config_path)) as store:
        if output == "-":
            counts = export_mod.export(store, fmt, sys.stdout, types=split(types), rels=split(rels))
            sys.stdout.flush()
        elif directory:
            tmp = f"{output.rstrip(os.sep) or output}.tmp{os.getpid()}"
            os.makedirs(tmp)
            try:
                counts = export_mod.export(store, fmt, Path(tmp), types=split(types), rels=split(rels))
                if os.path.isdir(output):
                    os.rmdir(output)  # empty, checked above
                os.replace(tmp, output)
            finally:
                if os.path.exists(tmp):
                    shutil.rmtree(tmp)
        else:
            tmp = f"{output}.tmp{os.getpid()}"
            try:
                with open(tmp, "w", encoding="utf-8", newline="\n") as out:
                    counts = export_mod.export(store, fmt, out, types=split(types), rels=split(rels))
                os.replace(tmp, output)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    where = "" if output == "-" else f" to {output}"
    more = "".join(f", {counts[k]} {k}" for k in ("documents", "chunks", "mentions") if counts.get(k))
    warn(f"exported {counts['nodes']} entities and {counts['edges']} relations{more} as {fmt}{where}")


IMPORT_FORMATS = {"mcp-memory": "the reference MCP memory server's memory.jsonl (entities, observations, relations)"}


@cli.command(name="import")
@click.argument("file", type=click.File("rb"), default="-", required=False)
@db_option()
@click.option("--format", "fmt", type=click.Choice(sorted(IMPORT_FORMATS)), required=True, help="Input format.")
@config_option
def import_cmd(file, db, fmt, config_path):
    """Import a graph file into the knowledge base (the memory profile's graph).

    All or nothing: a bad line, or a relation to an entity the file lacks, changes nothing.
    Entities and relations already present are kept and skipped; `kgr export --format
    mcp-memory` writes the file back.

    \b
    Example:
        kgr import --format mcp-memory memory.jsonl --db kb.sqlite
        kgr export --format mcp-memory --db kb.sqlite -o memory.jsonl
    """
    from kgr.memory import graph as memory
    from kgr.store.lock import writing

    if file.isatty():
        warn("waiting for a memory.jsonl on stdin")
    with writing(resolve_db(db, config_path)) as store:
        counts = memory.import_jsonl(store, file)
    warn(
        f"imported {counts['entities']} entities, {counts['observations']} observations and "
        f"{counts['relations']} relations ({counts['skipped_entities']} entities and "
        f"{counts['skipped_relations']} relations already present)"
    )


@cli.command()
@db_option()
@click.option(
    "--profile",
    type=click.Choice(["graphrag", "kb", "memory", "authoring", "all"]),
    default="graphrag",
    show_default=True,
    help="The tool set to expose (see the README's profile table).",
)
@click.option("--http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="With --http: the address to bind (not loopback needs a token).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="With --http: the port (0: any free one).",
)
@click.option(
    "--token-env", metavar="VAR", help="With --http: require this environment variable's value as the bearer token."
)
@click.option(
    "--token",
    envvar="KGR_SERVE_TOKEN",
    show_envvar=True,
    help="With --http: the bearer token itself (prefer --token-env).",
)
@click.option(
    "--allow-host", multiple=True, metavar="NAME", help="With --http: another Host name to accept (repeatable)."
)
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    help="The knowledge root for ingest_docs [default: the one the database records].",
)
@click.option(
    "--watch",
    "watch_dir",
    type=click.Path(file_okay=False),
    help="Also keep this folder ingested (it becomes the root).",
)
@config_option
def serve(db, profile, http, host, port, token_env, token, allow_host, root, watch_dir, config_path):
    """Serve the knowledge base to MCP clients (stdio by default, or streamable HTTP).

    stdout carries protocol frames only; logs go to stderr. A database path given (--db,
    KGR_DB or sqlite.path) where no database exists yet starts an empty one (with --root
    or --watch, built from that folder).

    With the memory tools (--profile memory or all), KNOWLEDGE_BASE_FILE_PATH (or the
    reference memory server's MEMORY_FILE_PATH; the first wins when both are set) names a
    JSONL memory file imported at start when the database holds no memory entity yet; an
    unreadable or invalid file stops the server before anything is written.

    \b
    Example:
        kgr serve --db kb.sqlite --profile kb
        KNOWLEDGE_BASE_FILE_PATH=knowledge_base.jsonl kgr serve --profile memory --db memory.sqlite
    """
    from kgr.mcp import server as serve_mod

    if token_env:
        token = os.environ.get(token_env)
        if not token:
            raise click.BadParameter(
                f"the environment variable {token_env} is empty or unset", param_hint="--token-env"
            )
    if (token or allow_host or host != "127.0.0.1") and not http:
        raise click.UsageError("--host, --token, --token-env and --allow-host need --http")
    cfg = load_config(config_path)
    opts = serve_mod.Options(
        db=resolve_db(db, config_path),
        profile=profile,
        http=http,
        host=host,
        port=port,
        token=token,
        root=root,
        watch=watch_dir,
        allow_hosts=tuple(allow_host),
        create=named_db(db, config_path),
    )
    serve_mod.run(opts, cfg)


# -- the error boundary ---------------------------------------------------------------


@cli.command("man")
@click.argument("command", nargs=-1)
@click.option(
    "--write",
    "write_dir",
    type=click.Path(file_okay=False),
    help="Write every page into DIR/man1 instead, for man(1) (e.g. ~/.local/share/man).",
)
def man_cmd(command, write_dir):
    """Show the manual page of kgr, or of one of its commands.

    On a terminal the page opens in man(1); otherwise its roff source is printed. The
    pages are generated from this kgr, so they match it whatever the install. An editable
    install (pip install -e .) installs no man pages: write them where man(1) looks with
    --write (man kgr then finds them when DIR is on the manual path: ~/.local/share/man is
    when ~/.local/bin is on PATH; else set MANPATH).

    \b
    Example:
        kgr man ingest
        kgr man --write ~/.local/share/man && man kgr
    """
    import shutil
    import subprocess
    from pathlib import Path

    from kgr import docs

    if write_dir is not None:
        if command:
            raise click.UsageError("--write writes every page: give no COMMAND")
        target = Path(write_dir).expanduser() / "man1"
        target.mkdir(parents=True, exist_ok=True)
        pages = docs.man_pages()
        for name, text in pages.items():
            (target / name).write_text(text, encoding="utf-8")
        warn(f"kgr man: wrote {len(pages)} pages to {target}")
        return
    page = docs.man_page(tuple(command))
    if page is None:
        raise click.UsageError(f"no command kgr {' '.join(command)}", ctx=click.get_current_context())
    man = shutil.which("man")
    if sys.stdout.isatty() and man:
        raise click.exceptions.Exit(subprocess.run([man, "-l", "-"], input=page.encode()).returncode)
    click.echo(page, nl=False)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the group, turning every error into one line and an exit status."""
    try:
        code = cli.main(args=argv, prog_name="kgr", standalone_mode=False)
    except click.exceptions.Exit as exc:
        _exit(exc.exit_code)
    except click.Abort:
        warn("Interrupted")
        _exit(ExitStatus.INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        _exit(exc.exit_code)
    except KeyboardInterrupt:
        warn("Interrupted")
        _exit(ExitStatus.INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`kgr ... | head`): exit quietly.
        _stdout_to_devnull()
        _exit(ExitStatus.OK)
    else:
        _exit(code if isinstance(code, int) else ExitStatus.OK)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null once its reader has gone, so that the flush at shutdown
    does not raise BrokenPipeError again (and Python does not complain about it)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _exit(code: int | None) -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
    sys.exit(int(code or 0))


if __name__ == "__main__":  # pragma: no cover
    main()
