"""Export the evaluation inputs: the candidate collection, BM25 collections, queries, families.

    spark-submit spark_jobs/prepare_evaluation.py --lake ./data/lake --out ./data/work/evaluation

The twin of prepare_retrieval for evaluation. Writes under --out (any Spark URI):
collection/ (Parquet: id, lang, text; one TAC per patent, its primary language's),
bm25/<lang>/ (Pyserini JsonCollection: every TAC in every language), queries/ (Parquet:
silver/eval_queries in each query view with their X citations), families/ (Parquet:
family_id, members) and _manifest.json (counts and the Delta versions read). Every model of
a comparison is then scored by ``python -m evaluation.evaluate --inputs <out>`` on exactly
the same collection and queries, without Spark work of its own.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from lake import JobRun, build_session, fs, job_arguments
from lake.cli import run_job
from spark_jobs.lib import retrieval as retrieval_inputs

MANIFEST = "_manifest.json"


def run(
    spark: SparkSession, lake: str, out: str, run_id: str | None = None, args: dict | None = None
) -> dict:
    with JobRun(spark, lake, "prepare_evaluation", args or {"out": out}, run_id) as job:
        patents = job.read("silver/patents")
        views = job.read("silver/views")
        eval_queries = job.read("silver/eval_queries")
        fs.delete(spark, f"{out}/{MANIFEST}")  # readers never see a half-replaced folder as done
        tac = retrieval_inputs.evaluation_collection(views).persist()
        retrieval_inputs.candidates(patents, tac).write.mode("overwrite").parquet(
            f"{out}/collection"
        )
        bm25_documents = retrieval_inputs.write_bm25_collections(tac, f"{out}/bm25")
        retrieval_inputs.evaluation_queries(eval_queries, views).write.mode("overwrite").parquet(
            f"{out}/queries"
        )
        retrieval_inputs.family_members(patents).write.mode("overwrite").parquet(f"{out}/families")
        tac.unpersist()
        queries = spark.read.parquet(f"{out}/queries")
        manifest = {
            "collection": spark.read.parquet(f"{out}/collection").count(),
            "bm25_documents": bm25_documents,
            "query_views": queries.count(),
            "query_patents": queries.select("publication_number").distinct().count(),
            "delta_versions": dict(job.inputs),
        }
        fs.write_text(spark, f"{out}/{MANIFEST}", json.dumps(manifest, indent=2, sort_keys=True))
        job.count("collection", manifest["collection"])
        job.count("query_views", manifest["query_views"])
        job.count("query_patents", manifest["query_patents"])
        for lang, n in bm25_documents.items():
            job.count(f"bm25_documents_{lang}", n)
        return manifest


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the evaluation inputs (any URI)")
    args = parser.parse_args(argv)
    spark = build_session("xembed-prepare-evaluation", args.master)
    run(spark, args.lake, args.out, args.run_id, vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(run_job("prepare_evaluation", main))
