"""Export the evaluation inputs: the candidate collection, BM25 collections, queries, families.

    spark-submit spark_jobs/prepare_evaluation.py --lake ./data/lake --out ./data/work/evaluation

The twin of prepare_retrieval for evaluation. Writes under --out (any Spark URI):
collection/ (Parquet: id, lang, text, ipc_codes; one TAC per patent, its primary
language's), bm25/<lang>/ (Pyserini JsonCollection: every TAC in every language), queries/
(Parquet: silver/eval_queries in every query type, with their X citations, filing year,
country, IPC), families/ (Parquet: family_id, members), probe/ (Parquet: training-pool
patents, one per family, with section and subclass labels, for classification and
clustering) and _manifest.json (counts, the Delta versions read, the probe's size and seed
and this run's id). Every model of a comparison is then scored by ``python -m
evaluation.evaluate --inputs <out>`` on exactly the same collection and queries, without
Spark work of its own.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from lake import JobRun, build_session, fs, job_arguments, path_or_uri, positive_int
from lake.cli import run_job
from schemas import defaults
from spark_jobs.lib import retrieval as retrieval_inputs

MANIFEST = "_manifest.json"


def run(
    spark: SparkSession,
    lake: str,
    out: str,
    run_id: str | None = None,
    args: dict | None = None,
    probe_size: int = defaults.PROBE_SIZE,
    seed: int = 7,
) -> dict:
    with JobRun(spark, lake, "prepare_evaluation", args or {"out": out}, run_id) as job:
        patents = job.read("silver/patents")
        views = job.read("silver/views")
        claims = job.read("silver/claims")
        eval_queries = job.read("silver/eval_queries")
        excluded = job.read("silver/excluded_families")
        fs.delete(spark, f"{out}/{MANIFEST}")  # readers never see a half-replaced folder as done
        tac = retrieval_inputs.evaluation_collection(views).persist()
        collection = retrieval_inputs.candidates(patents, tac)
        retrieval_inputs.with_ipc_codes(collection, patents).write.mode("overwrite").parquet(
            f"{out}/collection"
        )
        bm25_documents = retrieval_inputs.write_bm25_collections(spark, tac, f"{out}/bm25")
        retrieval_inputs.evaluation_queries(eval_queries, views, claims, patents).write.mode(
            "overwrite"
        ).parquet(f"{out}/queries")
        retrieval_inputs.family_members(patents).write.mode("overwrite").parquet(f"{out}/families")
        collection = spark.read.parquet(f"{out}/collection")
        retrieval_inputs.probe_sample(patents, collection, excluded, probe_size, seed).write.mode(
            "overwrite"
        ).parquet(f"{out}/probe")
        tac.unpersist()
        queries = spark.read.parquet(f"{out}/queries")
        types = {r["view"]: r["count"] for r in queries.groupBy("view").count().collect()}
        manifest = {
            "collection": collection.count(),
            "bm25_documents": bm25_documents,
            "query_views": sum(types.get(v, 0) for v in defaults.QUERY_VIEWS),
            "query_types": dict(sorted(types.items())),
            "query_patents": queries.select("publication_number").distinct().count(),
            "probe_patents": spark.read.parquet(f"{out}/probe").count(),
            "delta_versions": dict(job.inputs),
            # the runs that wrote those versions: another lake built by the same pipeline has
            # the same version numbers, not the same runs
            "delta_runs": {name: snap.run_id for name, snap in job.snapshots.items()},
            # what else decides the files: evaluate keys its copy of remote inputs by this
            # manifest, so a folder prepared again (another probe, newer code) is fetched anew
            "probe": {"size": probe_size, "seed": seed},
            "run_id": job.run_id,
        }
        fs.write_text(spark, f"{out}/{MANIFEST}", json.dumps(manifest, indent=2, sort_keys=True))
        job.count("collection", manifest["collection"])
        job.count("query_views", manifest["query_views"])
        job.count("query_patents", manifest["query_patents"])
        job.count("probe_patents", manifest["probe_patents"])
        for lang, n in bm25_documents.items():
            job.count(f"bm25_documents_{lang}", n)
        return manifest


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=path_or_uri, required=True, help="folder for the evaluation inputs (any URI)"
    )
    parser.add_argument(
        "--probe-size",
        type=positive_int,
        default=defaults.PROBE_SIZE,
        help="training-pool patents (one per family) for classification and clustering",
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the probe sample")
    args = parser.parse_args(argv)
    spark = build_session("xembed-prepare-evaluation", args.master)
    run(spark, args.lake, args.out, args.run_id, vars(args), args.probe_size, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(run_job("prepare_evaluation", main))
