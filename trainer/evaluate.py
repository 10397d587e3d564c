"""Evaluate a model (or BM25) on X-category retrieval by language x view, per IPC section.

    python -m trainer.evaluate --lake lake --model models/xembed --name xembed [--dims 64,full]
    python -m trainer.evaluate --lake lake --model bm25 --name bm25

Candidate collection: the TAC of every patent in the lake (dense: the primary-language
TAC; BM25: every TAC, one Lucene index per language, searched in the query's language).
Queries: silver/eval_queries in each of their views (ABS, CLAIM, DESC, TAC, primary
language) with >= 1 X reference in the collection. The query patent and all members of its
family are removed from its candidates before scoring. Writes TREC runs, qrels and a
query-meta TSV under <lake>/runs/<run_id>/, and the Delta tables eval/runs, eval/per_query
and eval/metrics. The collection and queries are prepared once per version of the input
tables (<lake>/runs/_inputs/) and shared by every model evaluated on them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from trainer import metrics as M

QUERY_VIEWS = ("ABS", "CLAIM", "DESC", "TAC")


INPUT_TABLES = ("silver/patents", "silver/views", "silver/eval_queries")


def prepared_inputs(job, lake: str) -> tuple[Path, dict, list[dict]]:
    """(folder, families, queries) for the lake's current input versions, prepared once.

    Every model of a comparison is scored on the same collection and queries, so the first
    evaluation of these Delta versions writes them under ``<lake>/runs/_inputs/<versions>/``
    (collection Parquet, BM25 collections, families and queries as JSON) and later ones
    read that folder back instead of repeating the Spark work.
    """
    frames = {name: job.read(name) for name in INPUT_TABLES}  # records the versions read
    key = "-".join(f"{n.split('/')[1]}{job.inputs[n]}" for n in INPUT_TABLES)
    folder = Path(lake) / "runs" / "_inputs" / key
    if not (folder / "inputs.json").exists():
        staging = folder.with_name(f"{key}.tmp-{uuid.uuid4().hex[:8]}")
        members, queries = load_inputs(*frames.values(), staging)
        (staging / "inputs.json").write_text(
            json.dumps({"members": members, "queries": queries}, ensure_ascii=False)
        )
        try:
            staging.rename(folder)
        except OSError:  # a concurrent evaluation prepared the same versions first
            shutil.rmtree(staging, ignore_errors=True)
    job.info(f"inputs {folder}")
    saved = json.loads((folder / "inputs.json").read_text())
    return folder, saved["members"], saved["queries"]


def load_inputs(patents, views, queries, work: Path) -> tuple[dict, list[dict]]:
    """Write the collection (Parquet, BM25 collections) under ``work``; return (families, queries)."""
    from pyspark.sql import functions as F

    from spark_jobs.lib import retrieval as R

    work.mkdir(parents=True, exist_ok=True)
    tac = views.where(F.col("view") == "TAC").select(
        "publication_number", "family_id", "lang", "text"
    )
    R.candidates(patents, tac).write.mode("overwrite").parquet(str(work / "collection"))
    docs = R.bm25_documents(tac)
    for lang in [r["lang"] for r in docs.select("lang").distinct().collect()]:
        docs.where(F.col("lang") == lang).drop("lang").write.mode("overwrite").json(
            str(work / "bm25" / lang)
        )
    members = {
        r["family_id"]: list(r["m"])
        for r in patents.groupBy("family_id")
        .agg(F.collect_list("publication_number").alias("m"))
        .collect()
    }
    rows = (
        queries.select("publication_number", "lang", "ipc_section", "x_cited")
        .join(views.where(F.col("view").isin(*QUERY_VIEWS)), ["publication_number", "lang"])
        .select("publication_number", "family_id", "lang", "view", "ipc_section", "x_cited", "text")
    )
    return members, [r.asDict() for r in rows.collect()]


def search_dense(
    encoder,
    collection: Path,
    queries: list[dict],
    dims: list[int | None],
    depth: int,
    batch_size: int,
) -> dict[int, list[list[tuple[str, float]]]]:
    """dim -> per query [(doc, score)] best first, ``depth`` deep, from FAISS inner product."""
    import faiss
    import pyarrow.dataset as ds
    import torch.nn.functional as F

    ids: list[str] = []
    chunks = []
    for batch in ds.dataset(str(collection), format="parquet").to_batches(
        columns=["id", "text"], batch_size=4096
    ):
        ids.extend(batch.column("id").to_pylist())
        chunks.append(encoder.encode_passage(batch.column("text").to_pylist(), batch_size))
    import torch

    docs = torch.cat(chunks)
    qvec = encoder.encode_query(
        [q["text"] for q in queries], [q["lang"] for q in queries], batch_size
    )
    out = {}
    for dim in dims:
        d = dim or docs.shape[1]
        dv = F.normalize(docs[:, :d], dim=-1).numpy().astype(np.float32)
        qv = F.normalize(qvec[:, :d], dim=-1).numpy().astype(np.float32)
        index = faiss.IndexFlatIP(d)
        index.add(dv)
        scores, rows = index.search(qv, min(depth, len(ids)))
        out[d] = [
            [(ids[j], float(s)) for j, s in zip(rows[i], scores[i], strict=True) if j >= 0]
            for i in range(len(queries))
        ]
    return out


def search_bm25(
    inputs: Path, work: Path, queries: list[dict], depth: int
) -> dict[int, list[list[tuple[str, float]]]]:
    """BM25 top-``depth`` per query from Lucene indexes built under ``work`` from ``inputs``."""
    from trainer.retrieval import Bm25, build_bm25_index

    index_root = work / "bm25_index"
    for folder in sorted((inputs / "bm25").iterdir()):
        if folder.is_dir() and not (index_root / folder.name).exists():
            build_bm25_index(str(folder), str(index_root / folder.name), folder.name)
    bm25 = Bm25(str(index_root))
    return {0: [bm25.search(q["text"], q["lang"], depth) for q in queries]}


def exclude_family(
    results: list[tuple[str, float]], banned: set[str], depth: int
) -> list[tuple[str, float]]:
    """Drop the query patent and its family members, keep ``depth`` results (ties: docid)."""
    kept = [r for r in results if r[0] not in banned]
    return sorted(kept, key=lambda x: (-x[1], x[0]))[:depth]


def evaluate_results(
    results: dict[int, list[list[tuple[str, float]]]],
    queries: list[dict],
    members: dict,
    collection_ids: set[str],
    cutoffs: list[int],
    out_dir: Path,
    tag: str,
) -> tuple[list[dict], list[dict]]:
    """(per_query rows, aggregated metric rows) for every dim; writes TREC runs and qrels."""
    depth = max(cutoffs)
    qrels, meta = {}, {}
    for q in queries:
        qid = f"{q['publication_number']}|{q['view']}"
        qrels[qid] = set(q["x_cited"]) & collection_ids - set(members.get(q["family_id"], []))
        meta[qid] = q
    effective = {qid for qid, rel in qrels.items() if rel}
    per_query, aggregated = [], []
    names = [f"{m}@{k}" for m in ("hit", "recall") for k in cutoffs] + ["mrr", "ndcg@10"]
    for dim, lists in results.items():
        runs: dict[tuple, dict] = defaultdict(dict)
        for q, found in zip(queries, lists, strict=True):
            qid = f"{q['publication_number']}|{q['view']}"
            if qid in effective:
                banned = set(members.get(q["family_id"], [])) | {q["publication_number"]}
                runs[(q["lang"], q["view"])][qid] = exclude_family(found, banned, depth)
        rows = []
        for (lang, view), run in sorted(runs.items()):
            M.write_run(str(out_dir / f"{lang}_{view}_{dim}.trec"), run, tag)
            scored = M.score_queries(run, {qid: qrels[qid] for qid in run}, cutoffs)
            for qid, values in scored.items():
                q = meta[qid]
                ranks = M.relevant_ranks(M.ranked(run[qid]), qrels[qid])
                per_query.append(
                    {
                        "query_id": q["publication_number"],
                        "lang": lang,
                        "view": view,
                        "dim": dim,
                        "ipc_section": q["ipc_section"],
                        "first_x_rank": min(ranks) if ranks else None,
                        "x_ranks": ranks,
                        "n_x": len(qrels[qid]),
                    }
                )
                rows.append({"lang": lang, "view": view, "ipc_section": q["ipc_section"], **values})
        aggregated += [{**r, "dim": dim} for r in M.aggregate(rows, names)]
    M.write_qrels(str(out_dir / "qrels.txt"), {q: r for q, r in qrels.items() if q in effective})
    with open(out_dir / "query_meta.tsv", "w", encoding="utf-8") as f:
        f.write("qid\tlang\tview\tipc_section\n")
        for qid in sorted(effective):
            q = meta[qid]
            f.write(f"{qid}\t{q['lang']}\t{q['view']}\t{q['ipc_section'] or ''}\n")
    return per_query, aggregated


def write_tables(
    spark, lake: str, run_row: dict, per_query: list[dict], aggregated: list[dict]
) -> None:
    from schemas import table
    from spark_jobs.lib.lake import write_table

    run_id, name = run_row["run_id"], run_row["name"]
    tables = {
        "eval/runs": [run_row],
        "eval/per_query": [{"run_id": run_id, **r} for r in per_query],
        "eval/metrics": [{"run_id": run_id, "name": name, **r} for r in aggregated],
    }
    for target, rows in tables.items():  # a rerun of the same run id replaces its rows
        frame = spark.createDataFrame(rows, table(target).spark_schema())
        write_table(spark, frame, lake, target, replace_where=f"run_id = '{run_id}'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True)
    parser.add_argument("--model", required=True, help="model folder, builtin:..., or bm25")
    parser.add_argument(
        "--name", required=True, help="row label in the tables (e.g. xembed, sft, bm25)"
    )
    parser.add_argument(
        "--dims", default="64,full", help="dense dims to evaluate; 'full' = model dim"
    )
    parser.add_argument("--cutoffs", default=",".join(map(str, M.DEFAULT_CUTOFFS)))
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--max-length", type=int, default=None, help="override the model's max tokens"
    )
    args = parser.parse_args(argv)
    cutoffs = sorted({int(k) for k in args.cutoffs.split(",")})
    dims = [None if d == "full" else int(d) for d in args.dims.split(",")]
    run_id = args.run_id or f"{args.name}-{datetime.now(UTC):%Y%m%dT%H%M%S}"

    from spark_jobs.lib.lake import JobRun
    from spark_jobs.lib.session import build_session

    spark = build_session("xembed-evaluate", "local[2]")
    out_dir = Path(args.lake) / "runs" / run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    with JobRun(spark, args.lake, "evaluate", vars(args), run_id=run_id) as job:
        inputs, members, queries = prepared_inputs(job, args.lake)
        largest_family = max((len(m) for m in members.values()), default=1)
        depth = max(cutoffs) + largest_family
        import pyarrow.dataset as ds

        collection_ids = set(
            ds.dataset(str(inputs / "collection"), format="parquet")
            .to_table(columns=["id"])
            .column("id")
            .to_pylist()
        )
        if args.model == "bm25":
            results = search_bm25(inputs, out_dir, queries, depth)
            model_path, used_dims = None, [0]
        else:
            from trainer.encoder import Encoder
            from trainer.models import resolve

            model_path = resolve(args.model)
            encoder = Encoder.from_pretrained(model_path)
            if args.max_length:
                encoder.encoder_config.max_length = args.max_length
            results = search_dense(
                encoder, inputs / "collection", queries, dims, depth, args.batch_size
            )
            used_dims = sorted(results)
        per_query, aggregated = evaluate_results(
            results, queries, members, collection_ids, cutoffs, out_dir, args.name
        )
        run_row = {
            "run_id": run_id,
            "name": args.name,
            "model_path": model_path,
            "dims": used_dims,
            "data_versions": dict(job.inputs),
            "created_at": datetime.now(UTC),
        }
        write_tables(spark, args.lake, run_row, per_query, aggregated)
        overall = {
            (r["dim"], r["metric"], r["k"]): r["value"]
            for r in aggregated
            if r["lang"] == "ALL" and r["view"] == "ALL"
        }
        job.count("effective_query_views", len({(r["query_id"], r["view"]) for r in per_query}))
        for dim in used_dims:
            job.info(
                f"{args.name} dim={dim}: overall macro Hit@100 = {overall.get((dim, 'hit', 100), 0):.4f}, "
                f"Hit@10 = {overall.get((dim, 'hit', 10), 0):.4f}"
            )
    print(run_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
