"""Answering questions from a loaded database: ``query`` (hybrid vector + keyword + graph),
``entities`` (look-up, neighbourhoods), ``concepts`` (the kb profile's view of the graph), ``status``."""
