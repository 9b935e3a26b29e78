"""MCP tool profiles beyond graphrag: one module each, registered with the server on import."""
