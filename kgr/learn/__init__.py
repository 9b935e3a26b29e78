"""Learning from annotated folders (docs/ plus annotations/, the format of a golden corpus):
the relation classifier's training and its cross-validation."""
