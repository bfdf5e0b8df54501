"""Using trained models: decoding (greedy, sampling, beam search) and scoring (log-probabilities of continuations, choices)."""
