"""Retrieval and evaluation: encode texts, build indexes, evaluate, test significance, report.

One ``python -m`` entry point per command:

    python -m evaluation.encode        # texts -> index/embeddings (or Parquet)
    python -m evaluation.index         # BM25 (Lucene) and FAISS indexes for Stage II mining
    python -m evaluation.evaluate      # search + score a model on prepare_evaluation's inputs
    python -m evaluation.significance  # paired randomization test between two runs
    python -m evaluation.report        # the paper's tables and figures
    python -m evaluation.metrics       # score a TREC run against qrels

Imports ``schemas``, ``lake``, ``retrieval`` and the encoder of ``trainer``; never
``spark_jobs`` (Spark preparation of the inputs is ``spark_jobs/prepare_evaluation.py``).
Submodules are imported on use, so ``import evaluation`` stays cheap.
"""

__all__ = ["encode", "evaluate", "index", "metrics", "report", "significance"]
