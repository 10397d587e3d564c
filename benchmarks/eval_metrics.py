"""Benchmark: dense search + scoring throughput at 64 dims, and metric computation vs ranx.

300,000 candidates x 64 dims (random unit vectors: the search cost does not depend on the
model), 1,000 queries with a few relevant documents each; FAISS exact inner-product search
to depth 500 + family exclusion + all metrics, on the CPUs of this machine. Then the same
run and qrels scored by evaluation.metrics and by ranx, as a ratio in one process.

    python benchmarks/eval_metrics.py --candidates 300000 --queries 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, machine, write_result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--candidates", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--depth", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of the metrics")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import faiss
    from ranx import Qrels, Run, evaluate

    from evaluation.evaluate import exclude_family
    from evaluation.metrics import DEFAULT_CUTOFFS, score_queries

    rng = np.random.default_rng(0)
    docs = rng.standard_normal((args.candidates, args.dim), dtype=np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    ids = [f"D{i:07d}" for i in range(args.candidates)]
    relevant = {
        f"q{i}": set(rng.choice(args.candidates, 3, replace=False).tolist())
        for i in range(args.queries)
    }
    # queries near one of their relevant documents, so hits happen at many depths
    queries = np.stack(
        [
            docs[min(r)] + 0.9 * rng.standard_normal(args.dim).astype(np.float32)
            for r in relevant.values()
        ]
    )
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    qrels = {q: {ids[j] for j in r} for q, r in relevant.items()}

    start = time.perf_counter()
    index = faiss.IndexFlatIP(args.dim)
    index.add(docs)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    scores, rows = index.search(queries, args.depth + 5)
    run = {}
    for i, q in enumerate(qrels):
        found = [(ids[j], float(s)) for j, s in zip(rows[i], scores[i], strict=True)]
        run[q] = exclude_family(found, {ids[rows[i][0]]}, args.depth)  # drop one "family member"
    per_query = score_queries(run, qrels, DEFAULT_CUTOFFS)
    search_s = time.perf_counter() - start

    ours_s = best_of(args.repeats, lambda: score_queries(run, qrels, DEFAULT_CUTOFFS))
    names = (
        [f"hit_rate@{k}" for k in DEFAULT_CUTOFFS]
        + [f"recall@{k}" for k in DEFAULT_CUTOFFS]
        + ["mrr", "ndcg@10"]
    )
    ranx_qrels = Qrels({q: {d: 1 for d in r} for q, r in qrels.items()})
    ranx_run = Run(
        {q: {d: float(len(r) - i) for i, (d, _) in enumerate(r)} for q, r in run.items()}
    )
    evaluate(ranx_qrels, ranx_run, names)  # numba compilation happens once, outside the timing
    theirs = evaluate(ranx_qrels, ranx_run, names)
    ranx_s = best_of(args.repeats, lambda: evaluate(ranx_qrels, ranx_run, names))
    ours_mean = sum(v["hit@100"] for v in per_query.values()) / len(per_query)
    assert abs(ours_mean - theirs["hit_rate@100"]) < 1e-9, (ours_mean, theirs["hit_rate@100"])

    print(
        f"{args.queries / search_s:.0f} queries/s search + scoring; metrics: ranx takes "
        f"{ranx_s / ours_s:.2f}x the time of evaluation.metrics"
    )
    write_result(
        "evaluation",
        {
            "machine": machine(),
            "candidates": args.candidates,
            "queries": args.queries,
            "dim": args.dim,
            "depth": args.depth,
            "metric_timing": f"best of {args.repeats}",
            "seconds": {
                "faiss_build": round(build_s, 3),
                "search_exclude_score": round(search_s, 3),
                "metrics_xembed": round(ours_s, 4),
                "metrics_ranx": round(ranx_s, 4),
            },
            "queries_per_second_search_and_scoring": round(args.queries / search_s, 1),
            "ratio_metrics_ranx_over_xembed_time": round(ranx_s / ours_s, 3),
            "hit_at_100": round(ours_mean, 4),
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
