"""The pipeline stages, one module each, every one a filter over JSON Lines records.

``normalize`` (with ``parsers``, ``redact``, ``isolation``) turns files into documents,
``chunk`` (with ``tokens``) cuts them, ``extract`` (with ``textmodel`` and ``relations``)
finds mentions and relations, ``link`` (with ``entitytypes``, the learned type model) makes
canonical entities, ``embed`` adds vectors and
``load`` writes records into the store. ``markdown`` is the one reader of a document's
structure (headings, fences, lists, tables) that chunking and extraction share. A stage
imports the store and nothing above it.
"""
