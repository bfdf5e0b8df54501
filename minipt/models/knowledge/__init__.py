"""Knowledge-enhanced pre-training: TransE entity embeddings and ERNIE-style fusion."""
