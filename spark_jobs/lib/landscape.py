"""In- vs out-of-landscape training: restrict training data to patents of some IPC sections.

A landscape is a set of IPC sections (``--landscape G,H``). Stage I pairs and Stage II
queries, positives and candidates then come from patents whose main IPC section
(``silver/patents.ipc_section``) is in the landscape; evaluation reports queries IN and OUT
of it separately (``evaluation.evaluate --landscape``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def restrict(rows: DataFrame, patents: DataFrame, sections: tuple[str, ...]) -> DataFrame:
    """Rows (with ``publication_number``) of patents in the landscape; all rows without one."""
    if not sections:
        return rows
    inside = patents.where(F.col("ipc_section").isin(*sections)).select("publication_number")
    return rows.join(inside, "publication_number", "left_semi")
