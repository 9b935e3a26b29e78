"""Configuration: defaults < YAML file < KGR_* environment < command-line flags.

The YAML keys are seed 000 section 13's, extended with kgr's own sections. Every
leaf ``a.b.c`` can be overridden by the environment variable ``KGR_A_B_C``; a few
names from the original specification are honoured too (see ENV_ALIASES).

:func:`load` parses all of it once into :class:`Settings`: frozen dataclasses, one per
section, whose field defaults are the only defaults kgr has (:data:`DEFAULTS` is derived
from them). Library functions take a :class:`Settings` (or one section of it);
:func:`settings_of` also accepts a partial mapping such as ``{"embed": {"stub": True}}``.
"""

from __future__ import annotations

import copy
import os
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping

import yaml

from kgr.errors import ConfigError

# The default embedding model: chunks are sized with its tokenizer, and it embeds them.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The names that mean the default model (the bundled all-MiniLM-L6-v2), lower-cased.
DEFAULT_ALIASES = frozenset({DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()})


class Section:
    """A section of the settings. ``section["key"]`` reads a field the way the former nested
    dict did (a tuple reads as a list); ``Section.from_config(cfg)`` is that section of any
    configuration :func:`settings_of` accepts."""

    PATH: ClassVar[str] = ""

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise KeyError(key)
        return _plain(getattr(self, key))

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self) -> list[str]:
        return [f.name for f in fields(self) if _is_key(f)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def as_dict(self) -> dict[str, Any]:
        """The section as plain nested dicts and lists (the YAML shape)."""
        return {f.name: _plain(getattr(self, f.name), dicts=True) for f in fields(self) if _is_key(f)}

    @classmethod
    def from_config(cls, cfg: Any) -> Any:
        node: Any = settings_of(cfg)
        for part in filter(None, cls.PATH.split(".")):
            node = getattr(node, part)
        return node


def _is_key(f) -> bool:
    return f.metadata.get("key", True)


def _plain(value: Any, dicts: bool = False) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if dicts and isinstance(value, Section):
        return value.as_dict()
    return value


@dataclass(frozen=True)
class WatchSettings(Section):
    PATH: ClassVar[str] = "watch"
    dir: str | None = None
    debounce_ms: int = 300


@dataclass(frozen=True)
class NormalizeSettings(Section):
    PATH: ClassVar[str] = "normalize"
    max_file_bytes: int = 100 * 1024 * 1024
    max_pages: int = 2000
    max_chars: int = 5_000_000
    parse_timeout_s: float = 90
    parse_cpu_s: int = 60
    parse_memory_mb: int = 1024
    max_zip_bytes: int = 100 * 1024 * 1024
    max_zip_ratio: int = 100
    dedup_threshold: float = 0.9
    min_dedup_chars: int = 80
    workers: int = 0  # 0: one per core
    redact: bool = True


@dataclass(frozen=True)
class ChunkBudgets(Section):
    """Token budget per chunk kind (kgr.stages.chunk's kinds)."""

    PATH: ClassVar[str] = "chunk.budgets"
    general: int = 256
    faq: int = 160
    definitions: int = 160
    procedure: int = 256


@dataclass(frozen=True)
class ChunkSettings(Section):
    PATH: ClassVar[str] = "chunk"
    model: str = DEFAULT_MODEL
    max_tokens: int = 256
    overlap: float = 0.15
    max_chunks_per_doc: int = 20000
    budgets: ChunkBudgets = field(default_factory=ChunkBudgets)


@dataclass(frozen=True)
class GazetteerSettings(Section):
    PATH: ClassVar[str] = "extract.gazetteer"
    mine_topk: int = 2000
    min_freq: int = 3


@dataclass(frozen=True)
class RegexSettings(Section):
    PATH: ClassVar[str] = "extract.regex"
    version: str = r"v?\d+\.\d+(\.\d+)?(-[a-z0-9]+(\.[a-z0-9]+)*)?"


@dataclass(frozen=True)
class ExtractSettings(Section):
    PATH: ClassVar[str] = "extract"
    ner: str = "spacy:en_core_web_sm"
    relations: str = "learned"  # learned: the classifier of kgr.stages.relmodel; rules: the patterns alone
    gazetteer: GazetteerSettings = field(default_factory=GazetteerSettings)
    regex: RegexSettings = field(default_factory=RegexSettings)


@dataclass(frozen=True)
class EmbedSettings(Section):
    PATH: ClassVar[str] = "embed"
    model: str = DEFAULT_MODEL
    dim: int | None = 384  # 0 or null: the model's own dimension
    quantize: int = 8
    batch_size: int = 32
    model_path: str | None = None
    endpoint: str | None = None
    stub: bool = False
    onnx: bool = True  # query embeddings through an ONNX export of the default model (fast cold start)
    # each chunk's sentences get vectors too, by which retrieval scores the chunk (kgr.store.vectors):
    # better at finding the one fact a question asks for, at two to three times the embedding time
    sentences: bool = True


@dataclass(frozen=True)
class SqliteSettings(Section):
    PATH: ClassVar[str] = "sqlite"
    path: str = "kgr.sqlite"
    wal: bool = True
    busy_timeout_ms: int = 5000


@dataclass(frozen=True)
class ServeSettings(Section):
    """kgr serve: the time one read tool call may take before it is stopped (SQL and Python loops)."""

    PATH: ClassVar[str] = "serve"
    time_budget_s: float = 2.0


@dataclass(frozen=True)
class SecuritySettings(Section):
    """Seed 000 section 16's allowlist of paths: the files under the knowledge root that may be
    read (kgr ingest, kgr watch, ingest_docs), as root-relative globs (``docs/**``, ``*.md``; a
    folder allows everything under it). Empty: the whole root. The root still confines every path."""

    PATH: ClassVar[str] = "security"
    allowlist: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetrievalWeights(Section):
    """Seed 000 section 14 (semantic, hop, rel), tuned on the train splits only
    (hipporag_musique_train100, hipporag_hotpotqa_train100) and the two golden corpora
    the issue names for tuning: bench/tune_placement.py --variant w.<weight>=<value>. Seed
    000's ``graph`` weight, when set, splits 2:1 into ``hop`` and ``rel``."""

    PATH: ClassVar[str] = "retrieval.weights"
    semantic: float = 0.75
    hop: float = 0.3
    rel: float = 0.05
    cosine_share: float = 0.0  # inside "semantic": cosine similarity vs the fused direct score (which has it already)
    seed_chunks: int = 3  # top fused chunks whose entities seed the expansion
    entity_sim: float = 0.75  # entity-vector similarity that makes a seed
    specificity: float = 1.0  # a seed keeps (1 - the share of the other documents that mention it) ** this
    pin: int = 1  # graph mode: the best fused results that keep their places at the top
    feedback: float = 3.0  # graph mode: weight of the second search, the next hop the best passage names (0: off)
    # graph mode: weight of a keyword search for the question's words that the best result's page does not write
    # (what is left to find once that page is found; 0: off)
    residual: float = 0.1
    # Fusion of the keyword and vector lists (hybrid and graph): "zscore" adds each list's scores as
    # z-scores over that list (a list whose head stands out from its tail counts more for that query;
    # a flat one, a weak vector list, hardly moves the keyword match), "rrf" is reciprocal rank fusion.
    fusion: str = "zscore"
    keyword_share: float = 0.7  # zscore: the keyword list's share of the fused score (the vector list has the rest)
    cosine_spread: float = 0.08  # zscore: least spread of a vector list's cosines (a flat list is not stretched)
    min_confidence: float = 0.5  # graph mode: edges below this confidence are not followed
    evidence: float = 0.0  # graph mode: how much of the graph's addition to a chunk depends on its direct evidence
    # Graph mode placement: a page whose subject the question names, or a page that a placed page names (a linked
    # mention), is placed next to the page that leads to it when the link's strength reaches ``place`` (0: off).
    place: float = 0.6
    place_rounds: int = 2  # rounds of "the placed page names X, X is the subject of the next page" (3-4 hop questions)
    place_per_page: int = 1  # pages one placed page may lead to, the nearest to the question first
    # a page placed by the question's naming its subject with at least this strength goes before the best result
    # when that result is not about anything the question names (0: never)
    place_first: float = 0.95
    # of the pages a placed page leads to, first the one it names right after the question's relation word
    # ("directed by X" for "the director of"), then the nearest to the question
    place_context: bool = True
    graph: float | None = None

    def __post_init__(self) -> None:
        if self.fusion not in ("zscore", "rrf"):
            raise ConfigError(f"retrieval.weights.fusion: expected zscore or rrf, got {self.fusion!r}")
        if self.graph is not None:
            object.__setattr__(self, "hop", 2 * float(self.graph) / 3)
            object.__setattr__(self, "rel", float(self.graph) / 3)


@dataclass(frozen=True)
class RetrievalSettings(Section):
    PATH: ClassVar[str] = "retrieval"
    k: int = 10
    hops: int = 2
    rels: tuple[str, ...] = ("defines", "depends_on", "uses", "cites", "part_of", "owned_by", "refers_to")
    weights: RetrievalWeights = field(default_factory=RetrievalWeights)


@dataclass(frozen=True)
class MemoryWeights(Section):
    """Seed 003's weights of a memory's score."""

    PATH: ClassVar[str] = "memory.weights"
    base: float = 0.6
    recency: float = 0.2
    importance: float = 0.1
    access: float = 0.1


@dataclass(frozen=True)
class MemorySettings(Section):
    """Remember and recall (seed 003): recency half-life, weights, consolidation."""

    PATH: ClassVar[str] = "memory"
    half_life_days: float = 30.0
    default_importance: float = 0.5
    consolidate_threshold: float = 0.9
    min_cosine: float = 0.2  # below this, a memory is no semantic match for a query
    graph_depth: int = 2  # recall follows entities this many hops from those the query names
    rerank: bool = True  # re-rank the best candidates by token-level MaxSim (late interaction)
    rerank_depth: int = 5  # how many of the best fused candidates the re-rank reorders
    weights: MemoryWeights = field(default_factory=MemoryWeights)


@dataclass(frozen=True)
class AuthoringSettings(Section):
    """Authoring the graph by hand (seed 002): whether an unregistered relationship type is refused."""

    PATH: ClassVar[str] = "authoring"
    strict_relation_types: bool = False  # false: a type used before it is registered is registered (balanced)


@dataclass(frozen=True)
class TenantSettings(Section):
    """Seed 004's TenantConfig, keys named as there: one server serves one tenant, whose
    okfRepoPath is the knowledge root. ``clientId`` names the tenant (status and kb_health
    report it). ``knownExternalIds`` are concept names, aliases or keys known to live outside
    this knowledge base: kb_health does not flag the references to them as dangling. It is
    never a read path: nothing outside the knowledge root is read or served."""

    PATH: ClassVar[str] = "tenant"
    clientId: str = ""  # "" : not set (reported as null)
    knownExternalIds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings(Section):
    """The whole configuration, parsed and checked: ``settings.chunk.max_tokens``."""

    project: str = "kgr"  # seed 000's project id: stamped in the database, reported by status
    watch: WatchSettings = field(default_factory=WatchSettings)
    normalize: NormalizeSettings = field(default_factory=NormalizeSettings)
    chunk: ChunkSettings = field(default_factory=ChunkSettings)
    extract: ExtractSettings = field(default_factory=ExtractSettings)
    embed: EmbedSettings = field(default_factory=EmbedSettings)
    sqlite: SqliteSettings = field(default_factory=SqliteSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    authoring: AuthoringSettings = field(default_factory=AuthoringSettings)
    tenant: TenantSettings = field(default_factory=TenantSettings)
    # the YAML file the settings were read from (not a configuration key)
    source: str | None = field(default=None, compare=False, metadata={"key": False})

    def get_path(self, dotted: str) -> Any:
        """One value by its dotted key: ``settings.get_path("chunk.max_tokens")``."""
        node: Any = self
        for part in dotted.split("."):
            if not isinstance(node, Section):
                raise ConfigError(f"no configuration key {dotted!r}")
            try:
                node = node[part]
            except KeyError:
                raise ConfigError(f"no configuration key {dotted!r}") from None
        return node

    def override(self, values: Mapping[str, Any]) -> Settings:
        """A copy with ``values`` (dotted key -> value) set, parsed and checked like a flag's."""
        tree = self.as_dict()
        for dotted, value in values.items():
            _check_key(dotted)
            _set(tree, dotted, value)
        return _from_tree(tree, source=self.source)


# Every default, as the nested dict of the YAML file (man page, docs, env coercion).
DEFAULTS: dict[str, Any] = Settings().as_dict()

# Environment names from seed 000 that map onto config keys.
ENV_ALIASES = {
    "EMBEDDING_GEMMA_MODEL_PATH": "embed.model_path",
    "EMBEDDING_GEMMA_ENDPOINT": "embed.endpoint",
    "EMBEDDING_GEMMA_STUB": "embed.stub",
    "KGR_DB": "sqlite.path",
}


def leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` for every leaf of a nested dict, in order."""
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from leaves(value, dotted + ".")
        else:
            yield dotted, value


def env_name(dotted: str) -> str:
    return "KGR_" + dotted.replace(".", "_").upper()


def _coerce(raw: str, default: Any, name: str) -> Any:
    if isinstance(default, bool) or default is None and raw.lower() in ("true", "false", "0", "1"):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{name}: expected a boolean, got {raw!r}")
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {raw!r}") from None
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{name}: expected a number, got {raw!r}") from None
    if isinstance(default, list):
        return [part.strip() for part in raw.split(",") if part.strip()]
    return raw


def _set(tree: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def _check_key(dotted: str) -> None:
    node: Any = DEFAULTS
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"no configuration key {dotted!r}")
        node = node[part]


def _merge(base: dict, over: Mapping[str, Any], where: str) -> None:
    for key, value in over.items():
        if key not in base:
            raise ConfigError(f"{where}: unknown key {key!r}", hint=f"known keys: {', '.join(sorted(base))}")
        if isinstance(base[key], dict):
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {key!r} must be a mapping")
            _merge(base[key], value, f"{where}.{key}" if where else key)
        else:
            base[key] = value


# -- the typed parse ---------------------------------------------------------------------------

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _typed(kind: Any, value: Any, dotted: str) -> Any:
    """``value`` as the field type ``kind``; a ConfigError naming the key when it cannot be."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigError(f"{dotted}: expected a boolean, got {value!r}")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ConfigError(f"{dotted}: expected an integer, got {value!r}")
    if kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ConfigError(f"{dotted}: expected a number, got {value!r}")
    if kind is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{dotted}: expected a string, got {value!r}")
    if typing.get_origin(kind) is tuple:  # tuple[str, ...]: a list, or names separated by commas
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise ConfigError(f"{dotted}: expected a list of names, got {value!r}")
    raise TypeError(f"{dotted}: no parser for {kind!r}")  # pragma: no cover - a new field type


def _build(cls: type, tree: Mapping[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if not _is_key(f) or f.name not in tree:
            continue
        value, dotted, kind = tree[f.name], prefix + f.name, hints[f.name]
        if is_dataclass(kind):
            kwargs[f.name] = _build(kind, value or {}, dotted + ".")
            continue
        args = typing.get_args(kind)
        optional = type(None) in args and typing.get_origin(kind) is not tuple
        if value is None:
            if optional:
                kwargs[f.name] = None
            # else: a key left empty in the file keeps its default
            continue
        if optional:
            kind = next(a for a in args if a is not type(None))
        kwargs[f.name] = _typed(kind, value, dotted)
    return cls(**kwargs)


def _from_tree(tree: Mapping[str, Any], source: str | None = None) -> Settings:
    settings = _build(Settings, tree, "")
    if source is not None:
        object.__setattr__(settings, "source", source)
    return settings


def settings_of(cfg: Settings | Mapping[str, Any] | None) -> Settings:
    """The settings of ``cfg``: a :class:`Settings` as it is, None as the defaults, and a
    mapping (all or part of the YAML shape) over the defaults, checked like a file."""
    if isinstance(cfg, Settings):
        return cfg
    if cfg is None:
        return Settings()
    if isinstance(cfg, Mapping):
        tree = copy.deepcopy(DEFAULTS)
        _merge(tree, cfg, "")
        return _from_tree(tree)
    raise TypeError(f"expected Settings or a mapping, not {type(cfg).__name__}")


def load(
    path: str | os.PathLike | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings with precedence flag > env > file > default.

    ``path`` falls back to $KGR_CONFIG. ``overrides`` maps dotted keys to flag values;
    None values mean "flag not given" and are ignored.
    """
    env = os.environ if env is None else env
    tree = copy.deepcopy(DEFAULTS)
    source = None
    path = path or env.get("KGR_CONFIG") or None
    if path:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {p}") from None
        except OSError as exc:
            raise ConfigError(f"cannot read config file {p}: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise ConfigError(f"{p}: invalid YAML{where}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: the top level must be a mapping")
        _merge(tree, data, "")
        source = str(p)
        # A relative database path in a config file is relative to that file, not to the cwd.
        db = tree["sqlite"]["path"]
        if isinstance(data.get("sqlite"), dict) and "path" in data["sqlite"] and db and not os.path.isabs(db):
            tree["sqlite"]["path"] = os.path.join(os.path.dirname(str(p)) or ".", db)
    defaults = dict(leaves(DEFAULTS))
    for alias, dotted in ENV_ALIASES.items():
        if alias in env and env_name(dotted) not in env:
            _set(tree, dotted, _coerce(env[alias], defaults[dotted], alias))
    for dotted, default in defaults.items():
        name = env_name(dotted)
        if name in env:
            _set(tree, dotted, _coerce(env[name], default, name))
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set(tree, dotted, value)
    return _from_tree(tree, source=source)


def db_path(cfg: Settings | Mapping[str, Any] | None) -> str:
    """The database path: flag/env/file/default precedence already applied by ``load``."""
    return settings_of(cfg).sqlite.path
