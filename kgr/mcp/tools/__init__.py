"""The MCP tools, one module per profile family (graphrag and kb, recall, memory, authoring):
each a :func:`kgr.mcp.registry.toolset` class of ``@tool`` methods, registered when
:mod:`kgr.mcp.server` imports it."""
