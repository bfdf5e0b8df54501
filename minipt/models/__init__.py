"""Model families, one per file, each citing its paper."""
