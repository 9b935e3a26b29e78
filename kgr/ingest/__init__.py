"""Keeping a database in step with a folder: the stages composed in one process.

``pipeline`` runs them over changed files, ``graphbuild`` builds the graph of pending
documents, ``writer`` is the one writer thread of a process, ``watch`` follows the folder,
``verify`` checks that the database still matches it.
"""
