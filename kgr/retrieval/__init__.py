"""Answering questions from a loaded database: ``query`` (hybrid vector + keyword + graph),
``entities`` (look-up, neighbourhoods), ``kb`` (the knowledge-base tools), ``status``."""
