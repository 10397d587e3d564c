"""Build silver/claim_graph from silver/claims: legal and technical edges between claims.

spark-submit spark_jobs/claim_graph.py --lake data/lake [--min-jaccard 0.2 --min-shared 2]
"""

from __future__ import annotations

import sys

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake import JobRun, build_session, job_arguments
from lake.cli import run_job
from schemas.defaults import CLAIM_RELATIONS, TECHNICAL_MIN_JACCARD, TECHNICAL_MIN_SHARED
from spark_jobs.lib import claim_graph

_EDGE = "struct<src_claim:int,dst_claim:int,relation:string,weight:double,evidence:string>"


def graph(claims: DataFrame, min_jaccard: float, min_shared: int) -> DataFrame:
    """silver/claim_graph rows: :func:`spark_jobs.lib.claim_graph.edges` per patent and language."""

    @F.pandas_udf(f"array<{_EDGE}>")
    def edges_of(groups: pd.Series) -> pd.Series:
        out = []
        for group in groups:
            found = claim_graph.edges(
                [(int(c["claim_number"]), c["text"], list(c["depends_on"])) for c in group],
                min_jaccard,
                min_shared,
            )
            out.append(
                [
                    {
                        "src_claim": e.src,
                        "dst_claim": e.dst,
                        "relation": e.relation,
                        "weight": e.weight,
                        "evidence": e.evidence,
                    }
                    for e in found
                ]
            )
        return pd.Series(out)

    grouped = claims.groupBy("publication_number", "family_id", "lang").agg(
        F.collect_list(F.struct("claim_number", "text", "depends_on")).alias("claims")
    )
    return grouped.select(
        "publication_number", "family_id", "lang", F.explode(edges_of("claims")).alias("e")
    ).select("publication_number", "family_id", "lang", "e.*")


def run(
    spark: SparkSession,
    lake: str,
    min_jaccard: float = TECHNICAL_MIN_JACCARD,
    min_shared: int = TECHNICAL_MIN_SHARED,
    run_id: str | None = None,
    args: dict | None = None,
) -> dict[str, int]:
    args = args or {"min_jaccard": min_jaccard, "min_shared": min_shared}
    with JobRun(spark, lake, "claim_graph", args, run_id) as job:
        claims = job.read("silver/claims")
        job.write(graph(claims, min_jaccard, min_shared), "silver/claim_graph")
        edges = job.read("silver/claim_graph")
        counts = {
            (r["relation"], r["lang"]): r["count"]
            for r in edges.groupBy("relation", "lang").count().collect()
        }
        for relation in CLAIM_RELATIONS:
            job.count(f"edges_{relation}", sum(n for (r, _), n in counts.items() if r == relation))
        for (relation, lang), n in sorted(counts.items()):
            job.count(f"edges_{relation}_{lang}", n)
        job.count(
            "patents_with_edges", edges.select("publication_number", "lang").distinct().count()
        )
        job.count("claims_in", claims.count())
        print(
            "claim_graph: "
            + ", ".join(f"{r} {job.metrics[f'edges_{r}']}" for r in CLAIM_RELATIONS)
            + f" edges over {job.metrics['patents_with_edges']} patent-languages",
            flush=True,
        )
        return job.metrics


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--min-jaccard",
        type=float,
        default=TECHNICAL_MIN_JACCARD,
        help="technical edge: least Jaccard overlap of the two claims' term sets",
    )
    parser.add_argument(
        "--min-shared",
        type=int,
        default=TECHNICAL_MIN_SHARED,
        help="technical edge: least number of shared terms",
    )
    args = parser.parse_args(argv)
    if not 0 < args.min_jaccard <= 1 or args.min_shared < 1:
        parser.error("--min-jaccard must be in (0, 1] and --min-shared at least 1")
    spark = build_session("xembed-claim-graph", args.master)
    run(spark, args.lake, args.min_jaccard, args.min_shared, args.run_id, vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(run_job("claim_graph", main))
