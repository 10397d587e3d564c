"""Evaluate a model (or BM25) on X-category retrieval by language x view, per IPC section.

    spark-submit spark_jobs/prepare_evaluation.py --lake LAKE --out INPUTS      # once
    python -m evaluation.evaluate --lake LAKE --inputs INPUTS --model models/xembed --name xembed
    python -m evaluation.evaluate --lake LAKE --inputs INPUTS --model bm25 --name bm25

This command only searches and scores. Its inputs come from ``spark_jobs/prepare_evaluation.py``
(any Spark URI; copied to a local cache when remote, since Lucene and FAISS read local
files): the collection (one TAC per patent; dense search), BM25 collections (every TAC, one
Lucene index per language, searched in the query's language), the evaluation queries in their
views (ABS, CLAIM, DESC, TAC; primary language) and the families. The query patent and all
members of its family are removed from its candidates before scoring. Dense search uses the
same FAISS index code as Stage II mining (``retrieval.search.DenseIndex``). Writes TREC runs,
qrels and a query-meta TSV under ``<lake>/runs/<run_id>/`` and the Delta tables eval/runs,
eval/per_query and eval/metrics (any Spark URI).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from evaluation import metrics
from lake import (
    JobRun,
    add_lake_arguments,
    build_session,
    fs,
    join,
    visible_versions,
    write_rows,
)
from retrieval.search import Bm25, DenseIndex, build_bm25_index
from schemas import defaults
from trainer.models import resolve

MANIFEST = "_manifest.json"  # written last by prepare_evaluation
CACHE = Path.home() / ".cache" / "xembed" / "evaluation"


class StaleInputsError(RuntimeError):
    """The prepared inputs were built from other versions of the lake's tables."""


def read_inputs(spark, lake: str, inputs: str, cache: Path) -> tuple[Path, dict, dict, list[dict]]:
    """(local folder, manifest, families, queries) of prepare_evaluation's output.

    Fails when the inputs are incomplete or were prepared from other table versions than the
    lake's current ones: a model must never be scored on a stale collection.
    """
    if not fs.exists(spark, join(inputs, MANIFEST)):
        raise FileNotFoundError(
            f"{inputs} holds no {MANIFEST}: run spark_jobs/prepare_evaluation.py "
            f"--lake {lake} --out {inputs} first"
        )
    text = fs.read_text(spark, join(inputs, MANIFEST))
    manifest = json.loads(text)
    current = visible_versions(spark, lake, manifest["delta_versions"])
    stale = {
        name: (version, current[name])
        for name, version in manifest["delta_versions"].items()
        if current[name] != version
    }
    if stale:
        raise StaleInputsError(
            f"{inputs} was prepared from other table versions than the lake's "
            + ", ".join(f"{n} v{a} (lake: v{b})" for n, (a, b) in sorted(stale.items()))
            + "; rerun spark_jobs/prepare_evaluation.py"
        )
    # the copy of remote inputs is keyed by their manifest: re-prepared inputs are fetched anew
    folder = fs.fetch(spark, inputs, cache, hashlib.sha256(text.encode()).hexdigest()[:16])
    families = {
        r["family_id"]: list(r["members"]) for r in pq.read_table(folder / "families").to_pylist()
    }
    queries = pq.read_table(folder / "queries").to_pylist()
    for q in queries:
        q["x_cited"] = list(q["x_cited"] or [])
    return folder, manifest, families, queries


def search_dense(
    encoder,
    collection: Path,
    queries: list[dict],
    dims: list[int | None],
    depth: int,
    batch_size: int,
) -> dict[int, list[list[tuple[str, float]]]]:
    """dim -> per query [(doc, score)] best first, ``depth`` deep, from FAISS inner product."""
    import pyarrow.dataset as ds
    import torch
    from torch.nn import functional

    ids: list[str] = []
    chunks = []
    for batch in ds.dataset(str(collection), format="parquet").to_batches(
        columns=["id", "text"], batch_size=4096
    ):
        ids.extend(batch.column("id").to_pylist())
        chunks.append(encoder.encode_passage(batch.column("text").to_pylist(), batch_size))
    docs = torch.cat(chunks)
    qvec = encoder.encode_query(
        [q["text"] for q in queries], [q["lang"] for q in queries], batch_size
    )
    out = {}
    for dim in dims:
        d = dim or docs.shape[1]
        doc_vectors = functional.normalize(docs[:, :d], dim=-1).numpy().astype(np.float32)
        query_vectors = functional.normalize(qvec[:, :d], dim=-1).numpy().astype(np.float32)
        index = DenseIndex.build(ids, doc_vectors, "flat")
        scores, rows = index.search(query_vectors, depth)
        out[d] = [
            [(ids[j], float(s)) for j, s in zip(rows[i], scores[i], strict=True) if j >= 0]
            for i in range(len(queries))
        ]
    return out


def search_bm25(
    inputs: Path, work: Path, queries: list[dict], depth: int
) -> dict[int, list[list[tuple[str, float]]]]:
    """BM25 top-``depth`` per query from Lucene indexes built under ``work`` from ``inputs``."""
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
            metrics.write_run(str(out_dir / f"{lang}_{view}_{dim}.trec"), run, tag)
            scored = metrics.score_queries(run, {qid: qrels[qid] for qid in run}, cutoffs)
            for qid, values in scored.items():
                q = meta[qid]
                ranks = metrics.relevant_ranks(metrics.ranked(run[qid]), qrels[qid])
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
        aggregated += [{**r, "dim": dim} for r in metrics.aggregate(rows, names)]
    metrics.write_qrels(
        str(out_dir / "qrels.txt"), {q: r for q, r in qrels.items() if q in effective}
    )
    with open(out_dir / "query_meta.tsv", "w", encoding="utf-8") as f:
        f.write("qid\tlang\tview\tipc_section\n")
        for qid in sorted(effective):
            q = meta[qid]
            f.write(f"{qid}\t{q['lang']}\t{q['view']}\t{q['ipc_section'] or ''}\n")
    return per_query, aggregated


def write_tables(
    spark, lake: str, run_row: dict, per_query: list[dict], aggregated: list[dict]
) -> None:
    run_id, name = run_row["run_id"], run_row["name"]
    tables = {
        "eval/runs": [run_row],
        "eval/per_query": [{"run_id": run_id, **r} for r in per_query],
        "eval/metrics": [{"run_id": run_id, "name": name, **r} for r in aggregated],
    }
    for target, rows in tables.items():  # a rerun of the same run id replaces its rows
        write_rows(spark, rows, lake, target, replace_where=f"run_id = '{run_id}'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lake_arguments(parser, required=True)
    parser.add_argument(
        "--inputs", required=True, help="spark_jobs/prepare_evaluation.py output (any URI)"
    )
    parser.add_argument("--model", required=True, help="model folder, builtin:..., or bm25")
    parser.add_argument(
        "--name", required=True, help="row label in the tables (e.g. xembed, sft, bm25)"
    )
    parser.add_argument(
        "--dims", default=defaults.EVAL_DIMS, help="dense dims to evaluate; 'full' = model dim"
    )
    parser.add_argument("--cutoffs", default=",".join(map(str, defaults.METRIC_CUTOFFS)))
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--max-length", type=int, default=None, help="override the model's max tokens"
    )
    parser.add_argument(
        "--cache",
        default=str(CACHE),
        help="local copies of remote inputs (Lucene/FAISS read files)",
    )
    args = parser.parse_args(argv)
    cutoffs = sorted({int(k) for k in args.cutoffs.split(",")})
    dims = [None if d == "full" else int(d) for d in args.dims.split(",")]
    run_id = args.run_id or f"{args.name}-{datetime.now(UTC):%Y%m%dT%H%M%S}"

    spark = build_session("xembed-evaluate", args.master)
    runs_uri = join(args.lake, "runs", run_id)
    with (
        JobRun(spark, args.lake, "evaluate", vars(args), run_id=run_id) as job,
        tempfile.TemporaryDirectory(prefix="xembed-eval-") as scratch,
    ):
        inputs, manifest, members, queries = read_inputs(
            spark, args.lake, args.inputs, Path(args.cache)
        )
        job.inputs.update(manifest["delta_versions"])
        out_dir = fs.local_path(runs_uri) or Path(scratch) / "run"
        out_dir.mkdir(parents=True, exist_ok=True)
        largest_family = max((len(m) for m in members.values()), default=1)
        depth = max(cutoffs) + largest_family
        collection_ids = set(
            pq.read_table(inputs / "collection", columns=["id"]).column("id").to_pylist()
        )
        if args.model == "bm25":
            results = search_bm25(inputs, Path(scratch), queries, depth)
            model_path, used_dims = None, [0]
        else:
            # deferred: torch and transformers load only for dense models, not for BM25 runs
            from trainer.encoder import Encoder

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
        fs.publish(spark, out_dir, runs_uri)
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
