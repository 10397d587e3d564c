"""Evaluate a model (or BM25, or a hybrid) on X-category retrieval and the other tasks.

    spark-submit spark_jobs/prepare_evaluation.py --lake LAKE --out INPUTS      # once
    python -m evaluation.evaluate --lake LAKE --inputs INPUTS --model models/xembed --name xembed
    python -m evaluation.evaluate --lake LAKE --inputs INPUTS --model bm25 --name bm25
    python -m evaluation.evaluate ... --model hybrid:models/xembed --name hybrid
    python -m evaluation.evaluate ... --model models/a models/b --name a b --run-id '{name}-v1'
    python -m evaluation.evaluate ... --query-types all --landscape G,H --tasks retrieval,inscope

Tasks (``--tasks``, default all): ``retrieval`` (Hit@K, Recall@K, MRR, nDCG@10 per language x
query type x IPC section, and per stratum: filing year, section, country, language, and IN /
OUT of ``--landscape``), ``inscope`` (InScope@10 at IPC subclass and section),
``classification`` and ``clustering`` (a logistic-regression probe and k-means on the frozen
TAC embeddings of prepare_evaluation's probe sample; dense models only). Definitions:
``evaluation.tasks`` and README "Evaluation tasks". ``hybrid:<model>`` fuses BM25 and the
model's run by reciprocal rank fusion (k = 60).

This command only searches and scores. Its inputs come from ``spark_jobs/prepare_evaluation.py``
(any Spark URI; copied to a local cache when remote, since Lucene and FAISS read local
files): the collection (one TAC per patent; dense search), BM25 collections (every TAC, one
Lucene index per language, searched in the query's language), the evaluation queries in their
views (ABS, CLAIM, DESC, TAC; primary language) and the families. The query patent and all
members of its family are removed from its candidates before scoring. Dense search uses the
same FAISS index code as Stage II mining (``retrieval.search.DenseIndex``). Writes TREC runs,
qrels and a query-meta TSV under ``<lake>/runs/<run_id>/`` and the Delta tables eval/runs,
eval/per_query and eval/metrics (any Spark URI), one commit each for all the models of the
command.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from evaluation import heldout, metrics, tasks
from lake import (
    JobRun,
    add_lake_arguments,
    add_landscape_argument,
    build_session,
    fs,
    join,
    label,
    path_or_uri,
    positive_int,
    write_rows,
)
from lake.cli import finish, flag_check, run_job
from lake.snapshots import stale_inputs
from lake.tables import sql_string
from retrieval.search import Bm25, DenseIndex, build_bm25_index
from schemas import defaults
from trainer.devices import DEVICE_HELP, device_name, inference_device
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
    stale = stale_inputs(spark, lake, manifest)
    if stale:
        raise StaleInputsError(
            f"{inputs} was prepared from other table versions than the lake's (or from "
            f"another lake) {stale}; rerun spark_jobs/prepare_evaluation.py"
        )
    # the copy of remote inputs is keyed by their manifest: re-prepared inputs are fetched anew
    folder = fs.fetch(spark, inputs, cache, hashlib.sha256(text.encode()).hexdigest()[:16])
    families = {
        r["family_id"]: list(r["members"]) for r in pq.read_table(folder / "families").to_pylist()
    }
    queries = pq.read_table(folder / "queries").to_pylist()
    for q in queries:
        q["x_cited"] = list(q["x_cited"] or [])
        q["ipc_codes"] = list(q.get("ipc_codes") or [])
    return folder, manifest, families, queries


def select_query_types(queries: list[dict], wanted: list[str]) -> list[dict]:
    """The queries of the ``wanted`` types (``parse_query_types``' list); fails naming a
    type the inputs do not hold."""
    held = {q["view"] for q in queries}
    if not held:
        raise ValueError(
            "the evaluation inputs hold no query at all: silver/eval_queries was empty when "
            "prepare_evaluation ran (split found no patent filed on or after the eval cutoff "
            "with an X citation resolved in the corpus: see split's eval_queries counter; an "
            "earlier --eval-cutoff or a corpus with X citations gives queries)"
        )
    missing = [t for t in wanted if t not in held]
    if missing:
        raise ValueError(
            f"the evaluation inputs hold no query of type(s) {missing} (they hold "
            f"{sorted(held)}): no query patent has that text (a corpus without descriptions "
            f"has no DESC queries), so pass --query-types {','.join(t for t in wanted if t in held)}"
            "; or the inputs were prepared by older code without that type: rerun "
            "spark_jobs/prepare_evaluation.py"
        )
    return [q for q in queries if q["view"] in set(wanted)]


def parse_query_types(text: str) -> list[str]:
    """``all`` or a comma-separated list of query types, upper-cased, in the given order.

    >>> parse_query_types("tac, abs,TAC")
    ['TAC', 'ABS']
    >>> parse_query_types("ABS,FOO")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: --query-types: unknown ['FOO']; known: ABS, CLAIM, DESC, TAC, TITLE, ...
    """
    if text.strip().lower() == "all":
        return list(defaults.QUERY_TYPES)
    wanted = list(dict.fromkeys(t.strip().upper() for t in text.split(",") if t.strip()))
    unknown = [t for t in wanted if t not in defaults.QUERY_TYPES]
    if unknown or not wanted:
        raise ValueError(
            f"--query-types: unknown {unknown}; known: {', '.join(defaults.QUERY_TYPES)}"
        )
    return wanted


def search_dense(
    encoder,
    collection: Path,
    queries: list[dict],
    dims: list[int | None],
    depth: int,
    batch_size: int,
    keep: dict | None = None,
) -> dict[int, list[list[tuple[str, float]]]]:
    """dim -> per query [(doc, score)] best first, ``depth`` deep, from FAISS inner product.

    ``keep`` (a dict) receives the collection's ids and embeddings for the probe tasks."""
    import pyarrow.dataset as ds
    import torch
    from torch.nn import functional

    too_wide = [d for d in dims if d and d > encoder.dim]
    if too_wide:
        # a prefix wider than the vector is the whole vector: its rows would carry the
        # wrong dim (checked before any text is encoded)
        raise ValueError(
            f"--dims {too_wide}: the model's embeddings have {encoder.dim} dims "
            "(pass smaller dims or 'full')"
        )
    ids: list[str] = []
    chunks = []
    for batch in ds.dataset(str(collection), format="parquet").to_batches(
        columns=["id", "text"], batch_size=4096
    ):
        ids.extend(batch.column("id").to_pylist())
        chunks.append(encoder.encode_passage(batch.column("text").to_pylist(), batch_size))
    docs = torch.cat(chunks)
    # FAISS keeps the lowest rows among scores tied at the cut: rows in docid order, so the
    # tie order is every ranked list's (docid), not the collection file's layout
    order = sorted(range(len(ids)), key=ids.__getitem__)
    ids, docs = [ids[i] for i in order], docs[order]
    if keep is not None:
        keep.update(ids=ids, embeddings=docs)
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


def search_depth(cutoffs: list[int]) -> int:
    """How many results each query keeps: the largest cutoff, and at least the 10 that
    nDCG@10 and InScope@10 read (with ``--cutoffs 5`` they were scored on 5 results)."""
    return max(*cutoffs, 10)


def banned_ids(query: dict, members: dict) -> set[str]:
    """The ids a query may not retrieve: the query patent and its family's members."""
    return set(members.get(query["family_id"], [])) | {query["publication_number"]}


def exclude_family(
    results: list[tuple[str, float]], banned: set[str], depth: int
) -> list[tuple[str, float]]:
    """Drop the query patent and its family members, keep ``depth`` results (ties: docid)."""
    kept = [r for r in results if r[0] not in banned]
    return metrics.best_first(kept)[:depth]


def evaluate_results(
    results: dict[int, list[list[tuple[str, float]]]],
    queries: list[dict],
    members: dict,
    collection_ids: set[str],
    cutoffs: list[int],
    out_dir: Path,
    tag: str,
    doc_ipc: dict[str, list[str]] | None = None,
    landscape: frozenset[str] = frozenset(),
    min_cell: int = defaults.MIN_CELL,
) -> tuple[list[dict], list[dict]]:
    """(per_query rows, aggregated metric rows) for every dim; writes TREC runs and qrels.

    Aggregated rows: task ``retrieval`` as in the paper (``stratum = ALL``) and per stratum
    cell; with ``doc_ipc`` (document -> IPC codes) also task ``inscope`` (InScope@10 at
    subclass and section) for the queries that have IPC codes.
    """
    depth = search_depth(cutoffs)
    qrels, meta = {}, {}
    for q in queries:
        qid = f"{q['publication_number']}|{q['view']}"
        qrels[qid] = set(q["x_cited"]) & collection_ids - set(members.get(q["family_id"], []))
        meta[qid] = q
    effective = {qid for qid, rel in qrels.items() if rel}
    if not effective:
        outside = sum(1 for q in queries if not set(q["x_cited"]) & collection_ids)
        raise ValueError(
            f"none of the {len(queries):,} query views has an X citation left to find: "
            f"{outside:,} cite no patent of the collection, {len(queries) - outside:,} only "
            "members of their own family (excluded from their candidates); nothing to score"
        )
    per_query, aggregated = [], []
    # MRR over the lists as searched: labelled with their depth, which --cutoffs sets
    mrr = f"mrr@{depth}"
    names = [f"{m}@{k}" for m in ("hit", "recall") for k in cutoffs] + [mrr, "ndcg@10"]
    inscope_names = [f"inscope_{level}@10" for level in tasks.IPC_LEVELS]
    for dim, lists in results.items():
        runs: dict[tuple, dict] = defaultdict(dict)
        for q, found in zip(queries, lists, strict=True):
            qid = f"{q['publication_number']}|{q['view']}"
            if qid in effective:
                runs[(q["lang"], q["view"])][qid] = exclude_family(
                    found, banned_ids(q, members), depth
                )
        rows, inscope_rows = [], []
        for (lang, view), run in sorted(runs.items()):
            metrics.write_run(str(out_dir / f"{lang}_{view}_{dim}.trec"), run, tag)
            scored = metrics.score_queries(run, {qid: qrels[qid] for qid in run}, cutoffs)
            for values in scored.values():
                values[mrr] = values.pop("mrr")
            inscope = {}
            if doc_ipc is not None:
                query_ipc = {qid: meta[qid]["ipc_codes"] for qid in run}
                for level in tasks.IPC_LEVELS:
                    inscope[level], _ = tasks.inscope(run, query_ipc, doc_ipc, 10, level)
            for qid, values in scored.items():
                q = meta[qid]
                ranks = metrics.ranks_of_relevant(run[qid], qrels[qid])
                shares = {level: inscope[level].get(qid) for level in inscope}
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
                        "filing_year": q.get("filing_year"),
                        "country_code": q.get("country_code"),
                        "in_landscape": tasks.in_landscape(q, landscape),
                        "inscope_subclass": shares.get("subclass"),
                        "inscope_section": shares.get("section"),
                    }
                )
                row = {
                    "lang": lang,
                    "view": view,
                    "ipc_section": q["ipc_section"],
                    "strata": tasks.strata({**q, "lang": lang}, landscape),
                    **values,
                }
                rows.append(row)
                if shares and all(v is not None for v in shares.values()):
                    inscope_rows.append(
                        {**row, **{f"inscope_{k}@10": v for k, v in shares.items()}}
                    )
        for task, task_rows, task_names in (
            ("retrieval", rows, names),
            ("inscope", inscope_rows, inscope_names),
        ):
            if not task_rows:
                continue
            cells = [
                {**r, "stratum": "ALL", "small_cell": None}
                for r in paper_aggregate(task_rows, task_names)
            ]
            cells += tasks.stratify(task_rows, task_names, min_cell)
            aggregated += [{**r, "task": task, "dim": dim} for r in cells]
    metrics.write_qrels(
        str(out_dir / "qrels.txt"), {q: r for q, r in qrels.items() if q in effective}
    )
    # one qrels per language x view beside its runs: a query whose list is empty after the
    # family exclusion has no line in the run, and `evaluation.metrics --complete` with the
    # cell's qrels counts it as eval/metrics does (with qrels.txt, every other cell's too)
    cells: dict[tuple, dict] = defaultdict(dict)
    for qid in effective:
        cells[(meta[qid]["lang"], meta[qid]["view"])][qid] = qrels[qid]
    for (lang, view), cell in cells.items():
        metrics.write_qrels(str(out_dir / f"{lang}_{view}.qrels"), cell)
    with open(out_dir / "query_meta.tsv", "w", encoding="utf-8") as f:
        f.write("qid\tlang\tview\tipc_section\n")
        for qid in sorted(effective):
            q = meta[qid]
            f.write(f"{qid}\t{q['lang']}\t{q['view']}\t{q['ipc_section'] or ''}\n")
    return per_query, aggregated


def paper_aggregate(rows: list[dict], names: list[str]) -> list[dict]:
    """The paper's aggregation (metrics.aggregate) where per-language and Overall rows
    (``view = ALL``) average the paper's four views only, whatever other query types ran:
    those appear per language x type and IPC section, so Tables 2-4 never change with them."""
    paper = [r for r in rows if r["view"] in defaults.QUERY_VIEWS]
    other = [r for r in rows if r["view"] not in defaults.QUERY_VIEWS]
    return metrics.aggregate(paper, names) + [
        r for r in metrics.aggregate(other, names) if r["view"] != "ALL"
    ]


def probe_tasks(
    ids: list[str],
    embeddings,
    probe: list[dict],
    dims: list[int],
    wanted: set[str],
    seed: int,
    info=print,
) -> list[dict]:
    """eval/metrics rows of the classification and clustering tasks on frozen embeddings of
    the probe patents (rows of prepare_evaluation's probe/), per dim and label level (the
    tasks L2-normalise each dim's prefix themselves)."""
    import torch

    position = {doc: i for i, doc in enumerate(ids)}
    rows_of = [r for r in probe if r["id"] in position]
    if not rows_of:
        info("classification/clustering skipped: no probe patent in the collection")
        return []
    index = torch.tensor([position[r["id"]] for r in rows_of])
    families = [r["family_id"] for r in rows_of]
    out = []
    for dim in dims:
        vectors = embeddings[index, :dim].numpy()
        for level in ("section", "subclass"):
            labels = [r[level] for r in rows_of]
            measured = {}
            for task in sorted(wanted & {"classification", "clustering"}):
                try:
                    if task == "classification":
                        result = tasks.classification(vectors, labels, families, seed)
                        measured[task] = (result, result["test_rows"], tasks.F1_METRICS)
                    else:
                        result = tasks.clustering(vectors, labels, seed)
                        measured[task] = (result, result["rows"], tasks.V_METRICS)
                except ValueError as error:  # too few labels or rows: say so, write nothing
                    info(f"{task} by {level} skipped at dim {dim}: {error}")
            for task, (result, n, names) in measured.items():
                out += [
                    {
                        "task": task,
                        "lang": "ALL",
                        "view": "TAC",
                        "dim": dim,
                        "ipc_section": "ALL",
                        "stratum": f"label={level}",
                        "metric": name,
                        "k": None,
                        "value": float(result[name]),
                        "n_queries": int(n),
                        "small_cell": None,
                    }
                    for name in names
                ]
    return out


def write_tables(spark, lake: str, evaluated: list[tuple[dict, list[dict], list[dict]]]) -> None:
    """One write per eval table for every ``(run row, per-query rows, metric rows)`` of this
    process: a rerun of the same run ids replaces their rows."""
    ids = [run_row["run_id"] for run_row, _, _ in evaluated]
    tables = {
        "eval/runs": [run_row for run_row, _, _ in evaluated],
        "eval/per_query": [
            {"run_id": run_row["run_id"], **r} for run_row, rows, _ in evaluated for r in rows
        ],
        "eval/metrics": [
            {"run_id": run_row["run_id"], "name": run_row["name"], **r}
            for run_row, _, rows in evaluated
            for r in rows
        ],
    }
    where = f"run_id IN ({', '.join(map(sql_string, ids))})"
    written = []
    try:
        for target, rows in tables.items():
            write_rows(spark, rows, lake, target, replace_where=where)
            written.append(target)
    except Exception:
        # a run is in all three tables or in none: eval/runs holding a run whose per-query
        # rows never landed would be reported as evaluated (the run log says it failed)
        for target in written:
            write_rows(spark, [], lake, target, replace_where=where)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    add_lake_arguments(parser)
    parser.add_argument(
        "--inputs",
        type=path_or_uri,
        required=True,
        help="spark_jobs/prepare_evaluation.py output (any URI)",
    )
    parser.add_argument(
        "--model",
        required=True,
        nargs="+",
        help="model folder, builtin:..., bm25, or hybrid:<model>; several: evaluated one "
        "after the other in this process (one Spark start, one torch import)",
    )
    parser.add_argument(
        "--name",
        required=True,
        nargs="+",
        type=label,
        help="row label in the tables (e.g. xembed, sft, bm25), one per --model",
    )
    parser.add_argument(
        "--dims",
        type=flag_check(defaults.parse_dims),
        default=defaults.EVAL_DIMS,
        help="dense dims to evaluate; 'full' = model dim",
    )
    parser.add_argument(
        "--cutoffs",
        type=flag_check(metrics.parse_cutoffs),
        default=",".join(map(str, defaults.METRIC_CUTOFFS)),
        help="metric cutoffs k (hit@k, recall@k)",
    )
    parser.add_argument(
        "--query-types",
        type=flag_check(parse_query_types),
        default=",".join(defaults.QUERY_VIEWS),
        help=f"comma-separated, or 'all' ({', '.join(defaults.QUERY_TYPES)}); "
        "default: the paper's four views",
    )
    parser.add_argument(
        "--tasks",
        type=flag_check(parse_tasks),
        default=",".join(defaults.EVAL_TASKS),
        help=f"comma-separated subset of {', '.join(defaults.EVAL_TASKS)}",
    )
    add_landscape_argument(parser, "report metrics of queries IN and OUT of it separately")
    parser.add_argument(
        "--min-cell",
        type=int,
        default=defaults.MIN_CELL,
        help="strata cells with fewer query views are marked small_cell",
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the probe tasks")
    parser.add_argument(
        "--run-id",
        default=None,
        help="run id; with several models a template holding {name} (e.g. '{name}-ci'); "
        "default <name>-<UTC time>",
    )
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument(
        "--max-length", type=positive_int, default=None, help="override the model's max tokens"
    )
    parser.add_argument(
        "--device", type=device_name, default="auto", help=f"dense models: {DEVICE_HELP}"
    )
    parser.add_argument(
        "--cache",
        default=str(CACHE),
        help="local copies of remote inputs (Lucene/FAISS read files)",
    )
    args = parser.parse_args(argv)
    if len(args.model) != len(args.name):
        parser.error(f"{len(args.model)} --model values but {len(args.name)} --name values")
    if len(args.name) != len(set(args.name)):
        parser.error(f"--name values must differ: {args.name}")
    if len(args.model) > 1 and args.run_id and "{name}" not in args.run_id:
        parser.error("several models need a --run-id template holding {name}, e.g. '{name}-ci'")
    template = args.run_id or f"{{name}}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    run_ids = [template.replace("{name}", name) for name in args.name]
    for run_id in run_ids:  # <lake>/runs/<run id> is a folder: no '/', '..', quotes
        try:
            defaults.check_label(run_id, "--run-id")
        except ValueError as error:
            parser.error(str(error))
    if any(model != "bm25" for model in args.model):
        try:  # a GPU this machine lacks fails here, not after the inputs are read
            inference_device(args.device)
        except ValueError as error:
            parser.error(str(error))
    spark = build_session("xembed-evaluate", args.master)
    # Each model is its own run (meta/job_runs); all stay open until the one write of the
    # eval tables below (3 Delta commits for the process, not 3 per model), so a run is
    # recorded as succeeded only once its rows are in, and a failure fails them all. What
    # the models have in common is done once: reading (and checking) the inputs, the BM25
    # search, a dense model's encoding (`xembed` and `hybrid:xembed` encode once).
    shared: dict = {}
    with contextlib.ExitStack() as open_runs:
        evaluated = []
        for model, name, run_id in zip(args.model, args.name, run_ids, strict=True):
            run_args = {**vars(args), "model": model, "name": name, "run_id": run_id}
            job = open_runs.enter_context(
                JobRun(spark, args.lake, "evaluate", run_args, run_id=run_id)
            )
            evaluated.append(evaluate_model(spark, argparse.Namespace(**run_args), job, shared))
        write_tables(spark, args.lake, evaluated)
    for run_id in run_ids:
        print(run_id)
    return 0


def evaluate_model(
    spark, args: argparse.Namespace, job: JobRun, shared: dict | None = None
) -> tuple[dict, list[dict], list[dict]]:
    """Evaluate one model (``args.model``, one value) as run ``job``: its TREC runs are
    published under ``<lake>/runs/<run id>``; returns its eval/runs row, per-query rows and
    metric rows for ``write_tables``.

    ``shared`` (one dict for the models of a command, whose other arguments are the same)
    keeps the inputs, the BM25 lists and each dense model's lists and embeddings for the next
    model: the same results, computed once."""
    shared = {} if shared is None else shared

    def once(key: tuple, compute):
        if key not in shared:
            shared[key] = compute()
        return shared[key]

    cutoffs = metrics.parse_cutoffs(args.cutoffs)
    dims = defaults.parse_dims(args.dims)
    wanted = parse_tasks(args.tasks)
    landscape = frozenset(args.landscape)
    query_types = parse_query_types(args.query_types)
    run_id = args.run_id
    runs_uri = join(args.lake, "runs", run_id)
    with tempfile.TemporaryDirectory(prefix="xembed-eval-") as scratch:
        inputs, manifest, members, queries = once(
            ("inputs",), lambda: read_inputs(spark, args.lake, args.inputs, Path(args.cache))
        )
        queries = select_query_types(queries, query_types)
        job.inputs.update(manifest["delta_versions"])
        out_dir = fs.local_path(runs_uri) or Path(scratch) / "run"
        out_dir.mkdir(parents=True, exist_ok=True)
        largest_family = max((len(m) for m in members.values()), default=1)
        depth = search_depth(cutoffs) + largest_family
        collection = pq.read_table(inputs / "collection", columns=["id", "ipc_codes"]).to_pylist()
        collection_ids = {r["id"] for r in collection}
        doc_ipc = {r["id"]: list(r["ipc_codes"] or []) for r in collection}
        kind, dense_model = model_kind(args.model)
        embeddings: dict = {}
        model_path = None
        if kind in ("bm25", "hybrid"):
            bm25 = once(("bm25", depth), lambda: search_bm25(inputs, Path(scratch), queries, depth))
        if kind in ("dense", "hybrid"):
            model_path = resolve(dense_model)
            once(
                ("held_out", model_path),
                lambda: heldout.check_held_out(
                    spark,
                    args.lake,
                    model_path,
                    manifest["delta_versions"][heldout.EXCLUDED],
                    {q["family_id"] for q in queries},
                    job.info,
                ),
            )

            def dense() -> tuple[dict, dict]:
                # deferred: torch and transformers load only for dense models, not for BM25
                from trainer.encoder import Encoder

                encoder = Encoder.for_inference(model_path, args.device)
                if args.max_length and encoder.limit_length(args.max_length) < args.max_length:
                    job.info(
                        f"--max-length {args.max_length}: {dense_model} embeds at most "
                        f"{encoder.encoder_config.max_length} tokens; longer texts are cut there"
                    )
                kept: dict = {}
                found = search_dense(
                    encoder, inputs / "collection", queries, dims, depth, args.batch_size, kept
                )
                return found, kept

            results, embeddings = once(("dense", model_path, depth), dense)
        if kind == "bm25":
            results = bm25
        elif kind == "hybrid":
            banned = [banned_ids(q, members) for q in queries]
            results = {dim: fuse(bm25[0], lists, depth, banned) for dim, lists in results.items()}
        used_dims = sorted(results)
        per_query, aggregated = [], []
        if wanted & {"retrieval", "inscope"}:
            per_query, aggregated = evaluate_results(
                results,
                queries,
                members,
                collection_ids,
                cutoffs,
                out_dir,
                args.name,
                doc_ipc if "inscope" in wanted else None,
                landscape,
                args.min_cell,
            )
            if "retrieval" not in wanted:
                aggregated = [r for r in aggregated if r["task"] != "retrieval"]
        if wanted & {"classification", "clustering"}:
            if kind != "dense":
                job.info(f"classification/clustering: not for a {kind} run (no embeddings)")
            elif not (inputs / "probe").exists():
                job.info("classification/clustering skipped: inputs hold no probe/ (re-prepare)")
            else:
                probe = pq.read_table(inputs / "probe").to_pylist()
                aggregated += probe_tasks(
                    embeddings["ids"],
                    embeddings["embeddings"],
                    probe,
                    used_dims,
                    wanted,
                    args.seed,
                    job.info,
                )
        fs.publish(spark, out_dir, runs_uri)
        run_row = {
            "run_id": run_id,
            "name": args.name,
            "model_path": model_path,
            "dims": used_dims,
            "data_versions": dict(job.inputs),
            "created_at": datetime.now(UTC),
            "tasks": sorted(wanted),
            "query_types": query_types,
            "landscape": sorted(landscape),
        }
    job.count("effective_query_views", len({(r["query_id"], r["view"]) for r in per_query}))
    for task in sorted({r["task"] for r in aggregated}):
        job.count(f"metric_rows_{task}", sum(1 for r in aggregated if r["task"] == task))
    for line in headline(aggregated, args.name):
        job.info(line)
    return run_row, per_query, aggregated


def parse_tasks(text: str) -> set[str]:
    wanted = {t.strip().lower() for t in text.split(",") if t.strip()}
    unknown = sorted(wanted - set(defaults.EVAL_TASKS))
    if unknown or not wanted:
        raise ValueError(
            f"--tasks: unknown {unknown}; choose from {', '.join(defaults.EVAL_TASKS)}"
        )
    return wanted


def model_kind(model: str) -> tuple[str, str | None]:
    """(``bm25`` | ``dense`` | ``hybrid``, the dense model or None)."""
    if model == "bm25":
        return "bm25", None
    if model.startswith("hybrid:"):
        dense = model.removeprefix("hybrid:")
        if not dense:
            raise ValueError("--model hybrid:<model>: name the dense model to fuse with BM25")
        return "hybrid", dense
    return "dense", model


def fuse(
    bm25: list[list[tuple[str, float]]],
    dense: list[list[tuple[str, float]]],
    depth: int,
    banned: list[set[str]],
) -> list[list[tuple[str, float]]]:
    """Per query, the reciprocal rank fusion (k = 60) of the BM25 and the dense list, each
    without the query's ``banned`` ids: the query patent and its family are no candidates,
    so they hold no rank that would shift the others' fused scores."""
    fused = []
    for i, (a, b, out) in enumerate(zip(bm25, dense, banned, strict=True)):
        lists = [{i: [r for r in found if r[0] not in out]} for found in (a, b)]
        fused.append(tasks.rrf(lists, depth=depth).get(i, []))
    return fused


def headline(aggregated: list[dict], name: str) -> list[str]:
    """One log line per dim: the overall figures of each task that ran."""
    lines = []
    for dim in sorted({r["dim"] for r in aggregated}):
        cells = {
            (r["task"], r["metric"], r["k"], r["stratum"]): r["value"]
            for r in aggregated
            if r["dim"] == dim and r["lang"] == "ALL" and r["view"] in ("ALL", "TAC")
        }
        parts = [
            f"{label} = {cells[key]:.4f}"
            for label, key in (
                ("macro Hit@100", ("retrieval", "hit", 100, "ALL")),
                ("Hit@10", ("retrieval", "hit", 10, "ALL")),
                ("nDCG@10", ("retrieval", "ndcg", 10, "ALL")),
                ("InScope@10 (subclass)", ("inscope", "inscope_subclass", 10, "ALL")),
                ("macro-F1 (section)", ("classification", "macro_f1", None, "label=section")),
                ("V-measure (section)", ("clustering", "v_measure", None, "label=section")),
            )
            if key in cells
        ]
        lines.append(f"{name} dim={dim}: " + ", ".join(parts))
    return lines


if __name__ == "__main__":
    finish(run_job("evaluate", main))
