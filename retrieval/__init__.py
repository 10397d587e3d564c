"""Search back ends shared by Stage II mining (``spark_jobs.mine_candidates``) and evaluation
(``evaluation.evaluate``): Pyserini/Lucene BM25 per language, FAISS dense indexes, the
BM25 + dense union, and the JDK lookup Pyserini needs. Imports only ``schemas``.

    python -m retrieval.java        # the JDK >= 21 Pyserini will use
"""

from retrieval.search import INDEX_TYPES, Bm25, DenseIndex, build_bm25_index, union_candidates

__all__ = ["INDEX_TYPES", "Bm25", "DenseIndex", "build_bm25_index", "union_candidates"]
