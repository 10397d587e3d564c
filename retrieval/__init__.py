"""Search back ends shared by Stage II mining (``spark_jobs.mine_candidates``) and evaluation
(``evaluation.evaluate``): Pyserini/Lucene BM25 per language, FAISS dense indexes, the
BM25 + dense union, and the JDK lookup Pyserini needs. Imports only ``schemas``.

    python -m retrieval.java        # the JDK >= 21 Pyserini will use

The names below resolve on first use, so ``python -m retrieval.java`` runs without
importing the search module first.
"""

from importlib import import_module

_PUBLIC = {
    "INDEX_TYPES": "retrieval.search",
    "Bm25": "retrieval.search",
    "DenseIndex": "retrieval.search",
    "build_bm25_index": "retrieval.search",
    "union_candidates": "retrieval.search",
    "prepare_pyserini_env": "retrieval.java",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'retrieval' has no attribute {name!r}")
