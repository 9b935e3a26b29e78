"""Memory for agents: ``graph`` is the memory-server knowledge graph (entities, relations,
observations), ``recall`` the recall profile's saved memories with hybrid search."""
