"""The seeds' comparisons, one experiment per file: each runs at a quick and a full budget."""
