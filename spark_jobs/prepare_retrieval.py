"""Export the Stage II retrieval inputs: BM25 collections, candidate TACs, training queries.

    spark-submit spark_jobs/prepare_retrieval.py --lake data/lake --out ./retrieval

Writes under --out: bm25/<lang>/part-*.json (Pyserini JsonCollection), candidates/ and
queries/ (Parquet, for the encoder) and _manifest.json (counts, Delta versions read).
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from lake import JobRun, add_landscape_argument, build_session, fs, job_arguments, path_or_uri
from lake.cli import run_job
from spark_jobs.lib import retrieval as retrieval_inputs
from spark_jobs.lib.landscape import restrict as in_landscape


def run(
    spark: SparkSession,
    lake: str,
    out: str,
    run_id: str | None = None,
    args: dict | None = None,
    landscape: tuple[str, ...] = (),
) -> dict:
    args = args or {"out": out, "landscape": landscape}
    with JobRun(spark, lake, "prepare_retrieval", args, run_id) as job:
        patents = job.read("silver/patents")
        # a landscape restricts queries, positives and candidates alike (the pool is its views)
        views = in_landscape(job.read("silver/views"), patents, landscape)
        excluded = job.read("silver/excluded_families")
        citations = job.read("bronze/citations")
        fs.delete(spark, f"{out}/_manifest.json")  # no old counts beside new folders
        tac = retrieval_inputs.pool_tac(views, excluded).persist()
        pool = retrieval_inputs.candidates(patents, tac)
        pool.write.mode("overwrite").parquet(f"{out}/candidates")
        bm25_documents = retrieval_inputs.write_bm25_collections(spark, tac, f"{out}/bm25")
        pool_ids = spark.read.parquet(f"{out}/candidates")
        positives = retrieval_inputs.positives(patents, citations, pool_ids)
        retrieval_inputs.training_queries(views, excluded, patents, positives).write.mode(
            "overwrite"
        ).parquet(f"{out}/queries")
        queries = spark.read.parquet(f"{out}/queries")
        manifest = {
            "candidates": pool_ids.count(),
            "bm25_documents": bm25_documents,
            "query_views": queries.count(),
            "query_patents": queries.select("query_id").distinct().count(),
            "delta_versions": dict(job.inputs),
            # the runs that wrote them: mining refuses a folder prepared from other ones
            "delta_runs": {name: snap.run_id for name, snap in job.snapshots.items()},
        }
        fs.write_text(
            spark, f"{out}/_manifest.json", json.dumps(manifest, indent=2, sort_keys=True)
        )
        tac.unpersist()
        job.count("candidates", manifest["candidates"])
        job.count("query_views", manifest["query_views"])
        job.count("query_patents", manifest["query_patents"])
        for lang, n in manifest["bm25_documents"].items():
            job.count(f"bm25_documents_{lang}", n)
        return manifest


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=path_or_uri, required=True, help="folder for the retrieval inputs"
    )
    add_landscape_argument(parser, "Stage II queries and candidates only from these sections")
    args = parser.parse_args(argv)
    spark = build_session("xembed-prepare-retrieval", args.master)
    run(spark, args.lake, args.out, args.run_id, vars(args), args.landscape)
    return 0


if __name__ == "__main__":
    sys.exit(run_job("prepare_retrieval", main))
