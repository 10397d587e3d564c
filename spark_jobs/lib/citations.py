"""Citation selections shared by split, Stage II retrieval inputs and triplets.

``bronze/citations`` carries one row per citing -> cited reference with its category flags
(``is_x``, ``is_y``, ``is_a``) and whether the cited publication resolved in the corpus.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def resolved_x(citations: DataFrame) -> DataFrame:
    """X-category citations whose cited publication is in the corpus."""
    return citations.where(F.col("is_x") & F.col("resolved"))


def resolved_a_only(citations: DataFrame) -> DataFrame:
    """A-category citations whose cited publication is in the corpus and that no citation of
    the same citing -> cited pair marks X or Y (two search reports of one patent may cite a
    document as A and as Y: it is no mere state of the art)."""
    a = citations.where(F.col("is_a") & F.col("resolved"))
    marked = citations.where(F.col("is_x") | F.col("is_y")).select("citing", "cited")
    return a.join(marked, ["citing", "cited"], "left_anti")
