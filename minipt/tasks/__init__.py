"""Task formats and metrics, one home each."""
