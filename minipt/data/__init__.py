"""Data: the toy HMM language with its exact oracle (hmm_language, toy_grammar), word-vector
truth (toy_vectors), fine-tuning tasks (toy_tasks, toy_text_tasks), text files, the
Shakespeare extra, LM batches."""
