"""Mine Stage II candidates: BM25 (query-language index) united with dense (FAISS) retrieval.

    spark-submit spark_jobs/mine_candidates.py --lake data/lake --retrieval ./retrieval \\
        --encoder miner [--k 2000]

For every training query view (retrieval/queries, embeddings in index/embeddings with
kind 'query'), BM25 top-k and dense top-k are united by alternating ranks into exactly k
unique candidates (fewer only when the pool is smaller: n_available says how many). Every
candidate carries its dense score (computed for all of them) and its BM25 rank and score
(null when BM25 did not return it). A view's candidates are stored as parallel arrays in
one row (gold/stage2_candidates), so the paper's k = 2,000 writes one row per view instead of
2,000. Executors search with Pyserini and FAISS in mapInPandas; indexes are opened once per
Python worker. Before any search the inputs must match: every query view has an embedding of
--encoder, the FAISS index holds that encoder's embeddings, and every query language with
BM25 documents has its index, and the FAISS index holds exactly the folder's candidate pool
(``check_inputs``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake import JobRun, build_session, job_arguments, path_or_uri, positive_int
from lake.cli import run_job
from lake.session import parallelism
from lake.snapshots import stale_inputs
from retrieval.search import (
    INDEX_INFO,
    Bm25,
    DenseIndex,
    encoded_from,
    manifest_digest,
    union_candidates,
)
from schemas import defaults, table
from spark_jobs.lib.leakage import write_audited

CANDIDATES = table("gold/stage2_candidates")  # the contract is the output schema
# mapInPandas output; nullability is enforced by the contract when the table is written
OUTPUT_SCHEMA = CANDIDATES.ddl().replace(" NOT NULL", "")
_CHUNK = 256  # query views searched and emitted together (bounds memory at k = 2,000)
_OPEN: dict = {}  # indexes opened in this Python worker, by path


def _open(kind: str, path: str):
    """The index at ``path``, opened once per Python worker and again when it was rebuilt
    (a Spark Connect server reuses its Python workers across jobs: a rerun after the index
    was rebuilt would have searched the old one)."""
    folder = Path(path)
    stamp = (
        tuple(sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in folder.iterdir()))
        if folder.is_dir()
        else None
    )
    key = (kind, path)
    if key not in _OPEN or _OPEN[key][0] != stamp:
        _OPEN[key] = (stamp, Bm25(path) if kind == "bm25" else DenseIndex.load(path))
    return _OPEN[key][1]


def mine(
    batches: Iterator[pd.DataFrame], retrieval: str, k: int, bm25_chars: int
) -> Iterator[pd.DataFrame]:
    """mapInPandas body: query views in, one row per view with its candidates as arrays out."""
    dense = _open("dense", f"{retrieval}/faiss")
    bm25 = _open("bm25", f"{retrieval}/bm25_index")
    for batch in batches:
        for start in range(0, len(batch), _CHUNK):
            yield _mine_chunk(batch.iloc[start : start + _CHUNK], dense, bm25, k, bm25_chars)


def _mine_chunk(frame: pd.DataFrame, dense, bm25, k: int, bm25_chars: int) -> pd.DataFrame:
    queries = np.stack(frame["embedding"].map(lambda v: np.asarray(v, dtype=np.float32)).to_list())
    _, rows = dense.search(queries, k)
    out = []
    for i, q in enumerate(frame.itertuples(index=False)):
        dense_ids = [dense.ids[j] for j in rows[i] if j >= 0]
        hits = bm25.search(q.text, q.lang, k, bm25_chars)
        union = union_candidates(hits, dense_ids, k)
        ranked = {doc: (rank, score) for rank, (doc, score) in enumerate(hits, start=1)}
        found = [ranked.get(doc, (None, None)) for doc in union]
        out.append(
            (
                q.query_id,
                q.view,
                q.lang,
                len(union),
                union,
                dense.score(queries[i], union),
                [rank for rank, _ in found],
                [score for _, score in found],
            )
        )
    return pd.DataFrame(out, columns=CANDIDATES.column_names).astype({"n_available": "int32"})


def check_inputs(
    spark: SparkSession, lake: str, retrieval: str, encoder: str, queries: DataFrame
) -> None:
    """Refuse inputs that do not belong together: a retrieval folder prepared from other table
    versions (its views may hold families the split excludes now), query views without an
    embedding of ``encoder`` (the join would skip them), a FAISS index of another encoder or
    dimension, or a query language whose BM25 index is missing (its views would get dense
    candidates only), indexes or embeddings made before the folder was prepared again.
    ``queries``: the query views left-joined with their embeddings."""
    root = Path(retrieval)
    manifest = (
        json.loads((root / "_manifest.json").read_text())
        if (root / "_manifest.json").is_file()
        else {}
    )
    stale = stale_inputs(spark, lake, manifest)
    if stale:  # e.g. split ran again: the queries and candidates hold families it excludes now
        raise ValueError(
            f"mine_candidates: {retrieval} was prepared from other table versions than the "
            f"lake's (or from another lake) {stale}; rerun spark_jobs/prepare_retrieval.py and "
            "the encoding and indexes after it"
        )
    seen = queries.agg(
        F.count("*").alias("views"),
        F.sum(F.col("embedding").isNull().cast("int")).alias("missing"),
        F.min(F.when(F.col("embedding").isNull(), F.col("key"))).alias("example"),
        F.collect_set(F.size("embedding")).alias("dims"),
        F.collect_set("lang").alias("langs"),
    ).first()
    if seen["missing"]:
        raise ValueError(
            f"mine_candidates: {seen['missing']:,} of {seen['views']:,} query views in "
            f"{retrieval}/queries have no {encoder!r} query embedding in index/embeddings "
            f"(e.g. {seen['example']!r}); encode them: python -m evaluation.encode --retrieval "
            f"{retrieval} --kind query --lake {lake} --encoder-name {encoder}"
        )
    rebuild = (
        f"python -m evaluation.index faiss --lake {lake} --encoder {encoder} --out {root / 'faiss'}"
    )
    try:
        index = DenseIndex.info(str(root / "faiss"))
    except FileNotFoundError as error:
        raise ValueError(f"mine_candidates: {error}; build it: {rebuild}") from None
    dims = sorted(d for d in seen["dims"] if d is not None and d >= 0)
    if index["encoder"] != encoder or dims not in ([], [index["dims"]]):
        raise ValueError(
            f"mine_candidates: {root / 'faiss'} holds {index['documents']:,} embeddings of "
            f"{index['dims']} dimensions from encoder {index['encoder']!r}, the "
            f"query views {'/'.join(map(str, dims))} dimensions from {encoder!r}; rebuild it: "
            f"{rebuild}"
        )
    _check_index_ids(spark, retrieval, rebuild, lake, encoder)
    documents, missing = bm25_expected(seen["langs"], manifest, root / "bm25_index")
    bm25_rebuild = (
        f"python -m evaluation.index bm25 --collections {root / 'bm25'} --out {root / 'bm25_index'}"
    )
    if missing:
        raise ValueError(
            f"mine_candidates: no BM25 index for the query language(s) {', '.join(missing)} "
            f"under {root / 'bm25_index'} (their views would get dense candidates only); build "
            f"them: {bm25_rebuild}"
        )
    prepared = manifest_digest(root)  # what every index and embedding must come from
    record = root / "bm25_index" / INDEX_INFO
    if not record.is_file():
        if any(documents.values()):
            raise ValueError(
                f"mine_candidates: {root / 'bm25_index'} has no {INDEX_INFO} (its build was "
                f"interrupted, or it predates the record); rebuild it: {bm25_rebuild}"
            )
    elif json.loads(record.read_text()).get("prepared") != prepared:
        raise ValueError(
            f"mine_candidates: {root / 'bm25_index'} was built from the collections of an "
            f"earlier prepare_retrieval of {retrieval} (it would search documents the pool no "
            f"longer holds, and miss its new ones); rebuild it: {bm25_rebuild}"
        )
    for kind in ("query", "tac"):  # encoded after the last prepare_retrieval of the folder
        if encoded_from(root, encoder, kind) != prepared:
            raise ValueError(
                f"mine_candidates: the {kind!r} embeddings of {encoder!r} in index/embeddings "
                f"were not encoded from this preparation of {retrieval} (it was prepared again "
                "since, or they were encoded from elsewhere: their texts may be older); encode "
                f"them: python -m evaluation.encode --retrieval {retrieval} --kind {kind} "
                f"--lake {lake} --encoder-name {encoder} --model M"
                + (f", then rebuild the FAISS index: {rebuild}" if kind == "tac" else "")
            )
    if index.get("encoded") != prepared:
        raise ValueError(
            f"mine_candidates: {root / 'faiss'} was built from embeddings encoded before "
            f"{retrieval} was last prepared (its vectors may be of older texts); rebuild it: "
            f"{rebuild}"
        )


def bm25_expected(langs, manifest: dict, index_root: Path) -> tuple[dict[str, int], list[str]]:
    """(the BM25 documents of each of the query languages ``langs``, the languages among them
    that have documents but no index under ``index_root``). A language the preparation's
    manifest lists no documents for has none, so no index: BM25 finds nothing there and its
    views are mined dense-only. An older manifest without the counts expects an index for
    every language."""
    counts = manifest.get("bm25_documents")
    documents = {lang: (counts or {}).get(lang, 0 if counts is not None else 1) for lang in langs}
    missing = sorted(
        lang for lang, n in documents.items() if n and not (index_root / lang).is_dir()
    )
    return documents, missing


def _check_index_ids(
    spark: SparkSession, retrieval: str, rebuild: str, lake: str, encoder: str
) -> None:
    """Refuse a FAISS index whose documents are not the folder's candidate pool (built from
    the embeddings of an earlier prepare_retrieval): it would mine documents outside the pool,
    families the split excludes now among them, and never return the pool's new ones."""
    indexed = pa.array(json.loads((Path(retrieval) / "faiss" / "ids.json").read_text()))
    pool = (
        spark.read.parquet(f"{retrieval}/candidates")
        .select("id")
        .toArrow()
        .column("id")
        .combine_chunks()
    )
    outside = pc.filter(indexed, pc.invert(pc.is_in(indexed, value_set=pool)))
    missing = pc.filter(pool, pc.invert(pc.is_in(pool, value_set=indexed)))
    if len(outside) or len(missing):
        raise ValueError(
            f"mine_candidates: {retrieval}/faiss is not built over {retrieval}/candidates: it "
            f"holds {len(outside):,} document(s) outside the pool"
            + (f" (e.g. {outside[0].as_py()!r})" if len(outside) else "")
            + f" and lacks {len(missing):,} of the pool's {len(pool):,}"
            + (f" (e.g. {missing[0].as_py()!r})" if len(missing) else "")
            + "; encode the pool again (python -m evaluation.encode --retrieval "
            f"{retrieval} --kind tac --lake {lake} --encoder-name {encoder}) and rebuild it: "
            f"{rebuild}"
        )


def run(
    spark: SparkSession,
    lake: str,
    retrieval: str,
    encoder: str,
    k: int = defaults.MINE_K,
    bm25_chars: int = defaults.BM25_QUERY_CHARS,
    partitions: int | None = None,
    run_id: str | None = None,
    args: dict | None = None,
) -> dict[str, int]:
    args = args or {"retrieval": retrieval, "encoder": encoder, "k": k}
    with JobRun(spark, lake, "mine_candidates", args, run_id) as job:
        embeddings = (
            job.read("index/embeddings")
            .where((F.col("encoder") == encoder) & (F.col("kind") == "query"))
            .select(F.col("id").alias("key"), "embedding")
        )
        queries = spark.read.parquet(f"{retrieval}/queries").join(embeddings, "key", "left")
        check_inputs(spark, lake, retrieval, encoder, queries)
        n_parts = partitions or max(2, parallelism(spark))
        mined = queries.repartition(n_parts, "key").mapInPandas(
            lambda it: mine(it, retrieval, k, bm25_chars), OUTPUT_SCHEMA
        )
        # the pool and the query views come from training views only (prepare_retrieval,
        # checked above); the audit proves it on what was written, every run
        write_audited(
            job,
            mined,
            "gold/stage2_candidates",
            id_columns=("query_id",),
            id_array_columns=("cand_ids",),
        )
        stats = (
            job.read("gold/stage2_candidates")
            .agg(
                F.count("*").alias("views"),
                F.sum((F.col("n_available") < k).cast("int")).alias("short"),
                F.min("n_available").alias("min_n"),
                F.sum("n_available").alias("rows"),
                F.sum(F.size(F.filter("bm25_ranks", lambda r: r.isNotNull()))).alias("bm25"),
            )
            .first()
        )
        job.count("query_views", stats["views"])
        job.count("query_views_with_fewer_than_k", stats["short"] or 0)
        job.count("min_candidates_per_view", stats["min_n"] or 0)
        job.count("candidate_rows", stats["rows"] or 0)
        job.count("bm25_hits", stats["bm25"] or 0)
        if stats["short"]:
            job.info(
                f"{stats['short']} query views have fewer than {k} candidates "
                f"(the pool is smaller); n_available records the true count"
            )
        return job.metrics


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--retrieval",
        type=path_or_uri,
        required=True,
        help="folder from prepare_retrieval + evaluation.index",
    )
    parser.add_argument(
        "--encoder", required=True, help="encoder name of the embeddings in index/embeddings"
    )
    parser.add_argument(
        "--k", type=positive_int, default=defaults.MINE_K, help="unique candidates per query view"
    )
    parser.add_argument(
        "--bm25-chars",
        type=positive_int,
        default=defaults.BM25_QUERY_CHARS,
        help="characters of the query text BM25 uses",
    )
    parser.add_argument(
        "--partitions",
        type=positive_int,
        default=None,
        help="Spark partitions of the query views (default: Spark's parallelism, at least 2)",
    )
    args = parser.parse_args(argv)
    spark = build_session("xembed-mine-candidates", args.master)
    run(
        spark,
        args.lake,
        args.retrieval,
        args.encoder,
        args.k,
        args.bm25_chars,
        args.partitions,
        args.run_id,
        vars(args),
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_job("mine_candidates", main))
