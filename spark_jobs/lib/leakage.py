"""Test-family exclusion: the leakage audit every stage runs on its output.

A training row leaks when any patent it names belongs to a family in silver/excluded_families
(the families of the evaluation queries), or when it names such a family directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lake import table_path
from lake.snapshots import tag
from lake.tables import restore


class LeakageError(RuntimeError):
    """A test-query family reached a training table."""


@dataclass(frozen=True)
class LeakageReport:
    table: str
    rows_checked: int
    leaks: int
    examples: tuple[str, ...]


def training_views(views: DataFrame, excluded_families: DataFrame) -> DataFrame:
    """Views of families that may be used for training (evaluation families removed)."""
    banned = F.broadcast(excluded_families.select("family_id").distinct())
    return views.join(banned, "family_id", "left_anti")


def excluded_publications(patents: DataFrame, excluded_families: DataFrame) -> DataFrame:
    """publication_number of every member of an excluded family."""
    fams = excluded_families.select("family_id").distinct()
    return patents.join(F.broadcast(fams), "family_id").select("publication_number").distinct()


def find_leaks(
    df: DataFrame,
    patents: DataFrame,
    excluded_families: DataFrame,
    id_columns: tuple[str, ...] = (),
    family_columns: tuple[str, ...] = (),
    id_array_columns: tuple[str, ...] = (),
) -> DataFrame:
    """Rows (column, value) of ``df`` that name an excluded patent or family.

    One scan of ``df``: every checked value becomes a (column, kind, value) row, joined once
    with the banned publication numbers and family ids (both small, broadcast).
    """
    banned = excluded_publications(patents, excluded_families).select(
        F.lit("id").alias("kind"), F.col("publication_number").alias("value")
    )
    banned = banned.unionByName(
        excluded_families.select(
            F.lit("family").alias("kind"), F.col("family_id").alias("value")
        ).distinct()
    )
    probes = [F.array(_probe(c, "id", F.col(c))) for c in id_columns]
    probes += [
        F.transform(F.coalesce(F.col(c), F.array().cast("array<string>")), _array_probe(c))
        for c in id_array_columns
    ]
    probes += [F.array(_probe(c, "family", F.col(c))) for c in family_columns]
    if not probes:
        raise ValueError("find_leaks needs at least one id, family or id-array column")
    values = df.select(F.explode(F.concat(*probes)).alias("p")).select("p.*")
    return values.join(F.broadcast(banned), ["kind", "value"], "left_semi").select(
        "column", "value"
    )


def _probe(column: str, kind: str, value: Column) -> Column:
    return F.struct(
        F.lit(column).alias("column"),
        F.lit(kind).alias("kind"),
        value.cast("string").alias("value"),
    )


def _array_probe(column: str):
    return lambda value: _probe(column, "id", value)


def audit_no_leakage(
    df: DataFrame, table: str, patents: DataFrame, excluded_families: DataFrame, **columns
) -> LeakageReport:
    """Raise LeakageError naming the table, columns and offending values if ``df`` leaks."""
    leaks = find_leaks(df, patents, excluded_families, **columns)
    n = leaks.count()
    examples = tuple(f"{r['column']}={r['value']}" for r in leaks.limit(10).collect()) if n else ()
    report = LeakageReport(table, df.count(), n, examples)
    if n:
        raise LeakageError(
            f"leakage in {table}: {n} value(s) name an evaluation-query family, "
            f"e.g. {', '.join(examples)}"
        )
    return report


def late_citations(pairs: DataFrame, patents: DataFrame, cutoff: str) -> int:
    """Citation pairs naming a patent published on or after the evaluation cutoff."""
    late = patents.where(F.col("publication_date") >= F.to_date(F.lit(cutoff))).select(
        F.col("publication_number").alias("id")
    )
    cited = pairs.where(F.col("signal") == "citation")
    sides = cited.select(F.col("anchor_id").alias("id")).unionByName(
        cited.select(F.col("positive_id").alias("id"))
    )
    return sides.join(F.broadcast(late), "id", "left_semi").count()


def write_audited(
    job, df: DataFrame, name: str, replace_where: str | None = None, **columns
) -> int:
    """Write ``name`` through ``job``, audit what was written, and undo the write on a leak.

    On a leak the table is restored to the version readers saw before (the empty creating
    version when there was none) before LeakageError propagates, so no reader ever sees
    leaked rows as the current version. Not to the newest commit: a failed run's, restored
    by an untagged commit, its rows would have become the published version.
    """
    path = table_path(job.lake, name)
    previous = job.published_version(name)
    version = job.write(df, name, replace_where)
    patents = job.read("silver/patents")
    excluded = job.read("silver/excluded_families")
    try:
        report = audit_no_leakage(job.read(name), name, patents, excluded, **columns)
    except LeakageError:
        previous = 0 if previous is None else previous
        restore(job.spark, path, previous, tag(job.run_id))  # the commit of this failed run
        job.info(f"leak found: restored {name} to version {previous}")
        raise
    job.count(f"audit_rows_{name.rsplit('/', 1)[-1]}", report.rows_checked)
    return version
