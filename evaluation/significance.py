"""Paired randomization tests between two evaluation runs (the paper reports none).

    python -m evaluation.significance --lake data/lake --a RUN_A --b RUN_B [--metric hit --k 100] [--dim 64]
    python -m evaluation.significance --lake data/lake --pair A:B --pair A:C --metric ndcg,hit

For every language x view, every language and Overall, the statistic is the difference of
the IPC-section macro scores (b - a) on the queries both runs share. The macro is linear in
the per-query values, so a permutation that swaps a query's two values flips the sign of
its weighted difference; the two-sided p-value is (#|perm| >= |observed| + 1) / (N + 1).
Results go to eval/significance.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from datetime import UTC, datetime

import numpy as np
from pyspark.sql import functions as F

from evaluation.metrics import SECTIONS, metrics_from_ranks
from evaluation.report import mixed_inputs, runs_hint
from lake import (
    add_lake_arguments,
    build_session,
    positive_int,
    read_pandas,
    read_table,
    write_rows,
)
from lake.cli import run_job
from lake.tables import sql_string
from schemas import defaults


def per_query_values(rows, metric: str, k: int | None) -> dict[tuple, tuple]:
    """(query_id, view) -> (lang, ipc_section, value) from eval/per_query rows of one run and dim."""
    name = metric if metric == "mrr" or not k else f"{metric}@{k}"
    cutoffs = [k] if k else []
    out = {}
    for r in rows:
        ranks = [rank for rank in r["x_ranks"] if not k or rank <= k]
        value = metrics_from_ranks(ranks, int(r["n_x"]), cutoffs)[name]
        out[(r["query_id"], r["view"])] = (r["lang"], r["ipc_section"], value)
    return out


def macro_weights(cells: dict[tuple, list[tuple]]) -> dict[tuple, float]:
    """Weight of each query in the mean over cells of the mean over sections of section means.

    A cell none of whose queries has an IPC section has no section mean, and, as in
    eval/metrics (``metrics.aggregate``), no part in the mean over cells."""
    sectioned = []
    for members in cells.values():
        by_section = defaultdict(list)
        for key, section in members:
            if section in SECTIONS:
                by_section[section].append(key)
        if by_section:
            sectioned.append(by_section)
    return {
        key: 1.0 / (len(sectioned) * len(by_section) * len(keys))
        for by_section in sectioned
        for keys in by_section.values()
        for key in keys
    }


def randomization_test(
    diffs: np.ndarray, weights: np.ndarray, permutations: int, seed: int
) -> float:
    observed = float(weights @ diffs)
    rng = np.random.default_rng(seed)
    contributions = weights * diffs
    extreme = 0
    for start in range(0, permutations, 1000):
        n = min(1000, permutations - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(n, len(diffs)))
        extreme += int(np.sum(np.abs(signs @ contributions) >= abs(observed) - 1e-12))
    return (extreme + 1) / (permutations + 1)


def compare(
    a: dict, b: dict, metric: str, k: int | None, permutations: int, seed: int
) -> list[dict]:
    shared = sorted(set(a) & set(b))
    groups: dict[tuple, list] = defaultdict(list)
    for key in shared:
        lang, section, _ = a[key]
        groups[(lang, key[1])].append((key, section))
    scopes = {cell: {cell: members} for cell, members in groups.items()}
    # per-language and overall scopes are the paper's: its four views, whatever else ran
    paper = {c: m for c, m in groups.items() if c[1] in defaults.QUERY_VIEWS}
    for lang in sorted({lang for lang, _ in paper}):
        scopes[(lang, "ALL")] = {c: m for c, m in paper.items() if c[0] == lang}
    if paper:
        scopes[("ALL", "ALL")] = paper
    out = []
    for (lang, view), cells in sorted(scopes.items()):
        weights = macro_weights(cells)
        keys = sorted(weights)
        if not keys:
            continue
        w = np.array([weights[key] for key in keys])
        va = np.array([a[key][2] for key in keys])
        vb = np.array([b[key][2] for key in keys])
        out.append(
            {
                "lang": lang,
                "view": view,
                "metric": metric,
                "k": k,
                "value_a": float(w @ va),
                "value_b": float(w @ vb),
                "diff": float(w @ (vb - va)),
                "p_value": randomization_test(vb - va, w, permutations, seed),
                "n_queries": len(keys),
                "permutations": permutations,
            }
        )
    return out


def metric_cutoff(metric: str, k: int) -> int | None:
    """The cutoff a metric is tested at: nDCG@10, MRR at the depth both runs searched
    (None here: :func:`main` sets it per pair), the others at ``k``."""
    return None if metric == "mrr" else (10 if metric == "ndcg" else k)


def searched_depth(spark, lake: str, runs: list[str]) -> dict[str, int]:
    """run_id -> how deep it searched: the k of its MRR row in eval/metrics (evaluate searches
    at least 10 deep whatever its --cutoffs; with --cutoffs 5 the largest Hit cutoff said 5,
    and MRR was tested at 5 and nDCG@10 refused)."""
    rows = (
        read_table(spark, lake, "eval/metrics")
        .where(F.col("run_id").isin(runs) & (F.col("task") == "retrieval"))
        .where(F.col("metric").isin("hit", "mrr"))
        .groupBy("run_id")
        .agg(F.max("k").alias("depth"))
        .collect()
    )
    return {r["run_id"]: int(r["depth"]) for r in rows}


def parse_pairs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[tuple]:
    split = [(text, text.partition(":")) for text in args.pair or []]
    pairs = [(a, b) for _, (a, _, b) in split]
    bad = [text for text, (a, colon, b) in split if not (a and colon and b)]
    if bad:
        parser.error(f"--pair takes RUN_A:RUN_B, got {bad}")
    if args.a or args.b:
        if not (args.a and args.b):
            parser.error("--a and --b go together")
        pairs.insert(0, (args.a, args.b))
    if not pairs:
        parser.error("name the runs to compare: --a RUN_A --b RUN_B, or --pair RUN_A:RUN_B")
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    add_lake_arguments(parser)
    parser.add_argument("--a", help="baseline run_id (e.g. the SFT control)")
    parser.add_argument("--b", help="compared run_id (e.g. the two-stage model)")
    parser.add_argument(
        "--pair",
        action="extend",
        nargs="+",
        metavar="RUN_A:RUN_B",
        help="comparisons to run in one process (one Spark start), e.g. --pair A:B A:C",
    )
    parser.add_argument(
        "--metric",
        default="hit",
        help="hit, recall, mrr or ndcg, or a comma-separated list (e.g. ndcg,hit); nDCG is "
        "tested at 10, MRR at the depth both runs searched, the others at --k",
    )
    parser.add_argument("--k", type=positive_int, default=100)
    parser.add_argument(
        "--dim", type=int, default=64, help="dimension of dense runs (BM25 runs use 0)"
    )
    parser.add_argument("--permutations", type=positive_int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    pairs = parse_pairs(args, parser)
    metrics = [m.strip() for m in args.metric.split(",") if m.strip()]
    unknown = sorted(set(metrics) - {"hit", "recall", "mrr", "ndcg"})
    if unknown or not metrics:
        parser.error(f"--metric: unknown {unknown or metrics}; choose from hit, recall, mrr, ndcg")

    spark = build_session("xembed-significance", args.master)
    per_query = read_pandas(args.lake, "eval/per_query", spark)
    rows_of = {}
    for run in dict.fromkeys(run for pair in pairs for run in pair):
        rows = per_query[per_query.run_id == run]
        if rows.empty:
            parser.error(
                f"eval/per_query has no rows for run {run!r}"
                + runs_hint([run], set(per_query.run_id))
            )
        dims = set(rows.dim)
        dim = args.dim if args.dim in dims else (0 if dims == {0} else None)
        if dim is None:
            parser.error(f"run {run!r} has dims {sorted(dims)}, not {args.dim}")
        rows_of[run] = rows[rows.dim == dim].to_dict("records")
    eval_runs = read_pandas(args.lake, "eval/runs", spark)
    for run_a, run_b in pairs:  # a paired test needs one query set, relevance and collection
        mixed = mixed_inputs(eval_runs, [run_a, run_b])
        if mixed:
            parser.error(mixed)
    depth = searched_depth(spark, args.lake, list(rows_of))
    deepest = max((metric_cutoff(m, args.k) or 0) for m in metrics)
    for run in rows_of:
        if deepest > depth.get(run, 0):
            # eval/per_query keeps the ranks within the run's depth: a deeper cutoff would
            # count only what the run searched and report it under the deeper label
            parser.error(
                f"run {run!r} searched {depth.get(run, 0)} deep (its largest --cutoffs, at "
                f"least 10), so "
                f"@{deepest} cannot be scored; pass --k {depth.get(run, 0)} or less, or rerun "
                f"evaluate with --cutoffs ...,{deepest}"
            )

    keys = {run: {(r["query_id"], r["view"]) for r in rows} for run, rows in rows_of.items()}
    for run_a, run_b in pairs:  # every pair checked before anything is written
        shared = len(keys[run_a] & keys[run_b])
        if not shared:
            parser.error(
                f"runs {run_a!r} and {run_b!r} share no query view: they were evaluated on "
                "different inputs or query types"
            )
        if shared < max(len(keys[run_a]), len(keys[run_b])):
            print(
                f"note: {run_b} vs {run_a}: tested on the {shared} query views both runs hold "
                f"({run_a}: {len(keys[run_a])}, {run_b}: {len(keys[run_b])})",
                file=sys.stderr,
            )

    now = datetime.now(UTC)
    for run_a, run_b in pairs:
        for metric in metrics:
            k = metric_cutoff(metric, args.k)
            if metric == "mrr":  # the depth both searched: runs of other --cutoffs compare
                k = min(depth.get(run_a, 0), depth.get(run_b, 0))
            values = {run: per_query_values(rows_of[run], metric, k) for run in (run_a, run_b)}
            results = compare(values[run_a], values[run_b], metric, k, args.permutations, args.seed)
            rows = [
                {"run_a": run_a, "run_b": run_b, "dim": args.dim, "created_at": now, **r}
                for r in results
            ]
            metric_k = f"metric = '{metric}' AND " + ("k IS NULL" if k is None else f"k = {k}")
            write_rows(
                spark,
                rows,
                args.lake,
                "eval/significance",
                replace_where=f"run_a = {sql_string(run_a)} AND run_b = {sql_string(run_b)} "
                f"AND dim = {args.dim} "
                f"AND {metric_k}",
            )
            print(f"{run_b} vs {run_a}: {metric}" + (f"@{k}" if k else ""))
            print(f"{'lang':5} {'view':6} {'a':>8} {'b':>8} {'diff':>8} {'p':>8} {'n':>5}")
            for r in results:
                print(
                    f"{r['lang']:5} {r['view']:6} {r['value_a']:8.4f} {r['value_b']:8.4f} "
                    f"{r['diff']:+8.4f} {r['p_value']:8.4f} {r['n_queries']:5d}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(run_job("significance", main))
