"""A value set's copy as the checker reads it: the index, delta layers, retired history, normalisation (pure)."""
