"""Data: the toy HMM language with its exact oracle, text files, the Shakespeare extra, LM batches."""
