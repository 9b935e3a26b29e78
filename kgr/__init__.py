"""kgr: a local-first Knowledge GraphRAG toolchain.

Every pipeline stage is a generator from records to records (see kgr.records);
the click commands in kgr.cli and the MCP tools are thin adapters over them.
"""

__version__ = "0.1.0"
