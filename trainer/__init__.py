"""GPU trainer, encoder, retrieval (Pyserini BM25, FAISS) and evaluator of xembed."""
