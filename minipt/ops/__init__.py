"""Pure forward/backward pairs, one concept per file."""
