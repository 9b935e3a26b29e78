"""The pipeline stages, one module each, every one a filter over JSON Lines records.

``normalize`` (with ``parsers``, ``redact``, ``isolation``) turns files into documents,
``chunk`` (with ``tokens``) cuts them, ``extract`` (with ``textmodel`` and ``relations``)
finds mentions and relations, ``link`` makes canonical entities, ``embed`` adds vectors and
``load`` writes records into the store. ``markdown`` reads a document's headings and code
for both chunk and extract, so they agree on its sections. A stage imports the store and
nothing above it.
"""
