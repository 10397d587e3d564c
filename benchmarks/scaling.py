"""Benchmark: cost curves — seconds per patent of the data pipeline at several corpus sizes.

In one Spark session (local[2] by default), for each --sizes corpus (generated, seed --seed):
  Stage I data:  generate, ingest, curate, split, build_pairs, each timed, and the plain
                 JSON -> Parquet copy of the same export as that size's I/O floor;
and for each --stage2-sizes corpus (its lake prepared untimed):
  Stage II data: prepare_retrieval, both encodes (the untrained tiny Qwen3, --max-length),
                 the BM25 and FAISS indexes, mine_candidates at --k, build_triplets.
It writes benchmarks/results/scaling.json (seconds, seconds per 1,000 patents and per query
view at every size, the growth exponent between the two largest sizes, and the projection to
the paper's 25.3M Stage I pairs and 2.67M Stage II examples) and scaling.png (the curves).
A first Stage I round on --warmup patents (not recorded) warms the driver's JIT, so the
smallest size is not charged with it. Each size's work folder is deleted when measured.

    python benchmarks/scaling.py --sizes 10000 30000 100000 --stage2-sizes 3000 10000
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, prepare_lake, timed, write_result
from stage2 import retrieval_steps

PAPER_STAGE1_PAIRS = 25_300_000  # paper 001, section 4.2
PAPER_STAGE2_EXAMPLES = 2_670_000  # paper 001, section 5 (training data)
STAGE1_STEPS = ("ingest", "curate", "split", "build_pairs")
STAGE2_STEPS = (
    "prepare_retrieval",
    "encode_tac",
    "encode_query",
    "bm25_index",
    "faiss_index",
    "mine_candidates",
    "build_triplets",
)


def exponent(sizes: list[int], seconds: list[float]) -> float | None:
    """b in seconds ~ size^b between the two largest sizes (1.0: linear)."""
    if len(sizes) < 2:
        return None
    (n1, t1), (n2, t2) = sorted(zip(sizes, seconds, strict=True))[-2:]
    return round(math.log(t2 / t1) / math.log(n2 / n1), 3)


def project(size: int, seconds: float, b: float | None, target: float) -> float:
    """Seconds at `target` from the largest measured point, along size^b (b >= 1)."""
    return seconds * (target / size) ** max(b or 1.0, 1.0)


def project_to(
    rows: list[dict], total: str, unit: str, per_unit: str, target: float, cores: int
) -> dict:
    """The largest size's `total` seconds carried to the `unit`s (patents, query views) that
    yield `target` outputs at its `per_unit` yield, as core-hours (seconds x cores)."""
    last = rows[-1]
    b = exponent([r["patents"] for r in rows], [r[total] for r in rows])
    needed = target / last[per_unit]
    seconds = project(last[unit], last[total], b, needed)
    return {
        "growth_exponent": b,
        f"{unit}_needed": round(needed),
        "core_hours": round(seconds * cores / 3600, 2),
    }


def stage1(spark, work: Path, patents: int, seed: int) -> dict:
    from spark_jobs import build_pairs

    seconds: dict[str, float] = {}
    metrics = prepare_lake(spark, work, patents, seed, seconds)
    with timed("baseline_json_to_parquet", seconds):
        spark.read.json(str(work / "sample")).write.mode("overwrite").parquet(
            str(work / "baseline")
        )
    with timed("build_pairs", seconds):
        pairs = build_pairs.run(spark, str(work / "lake"))
    total = sum(seconds[s] for s in STAGE1_STEPS)
    return {
        "patents": patents,
        "seconds": seconds,
        "seconds_stage1_data": round(total, 2),
        "seconds_per_1000_patents": {
            s: round(1000 * seconds[s] / patents, 3)
            for s in (*STAGE1_STEPS, "baseline_json_to_parquet")
        }
        | {"stage1_data": round(1000 * total / patents, 3)},
        "ratio_ingest_plus_curate_to_baseline": round(
            (seconds["ingest"] + seconds["curate"]) / seconds["baseline_json_to_parquet"], 2
        ),
        "silver_patents": metrics["curate"]["patents_out"],
        "pairs_written": pairs["pairs_written"],
        "pairs_per_patent": round(pairs["pairs_written"] / patents, 3),
    }


def stage2(spark, work: Path, patents: int, seed: int, k: int, model: str, max_length: int):
    from spark_jobs import build_triplets, mine_candidates

    prep: dict[str, float] = {}
    prepare_lake(spark, work, patents, seed, prep)
    lake = str(work / "lake")
    seconds: dict[str, float] = {}
    manifest = retrieval_steps(spark, lake, work / "retrieval", model, max_length, seconds)
    with timed("mine_candidates", seconds):
        mine_candidates.run(spark, lake, str(work / "retrieval"), "bench", k=k)
    with timed("build_triplets", seconds):
        built = build_triplets.run(spark, lake, seed=13, validation_size=min(2000, patents // 10))
    views = manifest["query_views"]
    total = sum(seconds[s] for s in STAGE2_STEPS)
    return {
        "patents": patents,
        "k": k,
        "query_views": views,
        "candidate_pool": manifest["candidates"],
        "examples": built["examples"],
        "examples_per_query_view": round(built["examples"] / views, 3),
        "seconds_prepare_lake": prep,
        "seconds": seconds,
        "seconds_stage2_data": round(total, 2),
        "seconds_per_1000_patents": round(1000 * total / patents, 3),
        "milliseconds_per_query_view": {s: round(1000 * seconds[s] / views, 3) for s in seconds}
        | {"stage2_data": round(1000 * total / views, 3)},
    }


def plot(stage1_rows: list[dict], stage2_rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    sizes = [r["patents"] for r in stage1_rows]
    for step in (*STAGE1_STEPS, "stage1_data", "baseline_json_to_parquet"):
        style = {"stage1_data": "k-", "baseline_json_to_parquet": "k:"}.get(step, "-")
        label = {"stage1_data": "total (4 jobs)", "baseline_json_to_parquet": "JSON->Parquet"}
        left.plot(
            sizes,
            [r["seconds_per_1000_patents"][step] for r in stage1_rows],
            style,
            marker="o",
            label=label.get(step, step),
        )
    left.set(
        xscale="log",
        xlabel="patents",
        ylabel="seconds per 1,000 patents",
        title="Stage I data (local[2])",
    )
    left.legend(fontsize=8)
    sizes = [r["patents"] for r in stage2_rows]
    for step in (*STAGE2_STEPS, "stage2_data"):
        style = "k-" if step == "stage2_data" else "-"
        right.plot(
            sizes,
            [r["milliseconds_per_query_view"][step] for r in stage2_rows],
            style,
            marker="o",
            label="total" if step == "stage2_data" else step,
        )
    k = stage2_rows[0]["k"] if stage2_rows else "?"
    right.set(
        xscale="log",
        xlabel="patents",
        ylabel="milliseconds per query view",
        title=f"Stage II data at k = {k} (local[2])",
    )
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--stage2-sizes", type=int, nargs="*", default=[3_000, 10_000])
    parser.add_argument("--k", type=int, default=100, help="Stage II candidates per query view")
    parser.add_argument("--model", default="builtin:qwen3-tiny")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument(
        "--warmup", type=int, default=2000, help="patents of an unrecorded first round (0: none)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", default=str(Path(__file__).resolve().parent / "work" / "scaling"))
    parser.add_argument("--out", default=None, help="result JSON (default benchmarks/results/)")
    parser.add_argument("--plot", default=str(RESULTS / "scaling.png"))
    args = parser.parse_args(argv)

    from lake import build_session

    spark = build_session("xembed-bench-scaling", args.master)
    cores = int(spark.sparkContext.defaultParallelism)
    stage1_rows, stage2_rows = [], []
    if args.warmup:
        print(f"== warm-up (not recorded), {args.warmup:,} patents", flush=True)
        work = Path(args.work) / "warmup"
        shutil.rmtree(work, ignore_errors=True)
        stage1(spark, work, args.warmup, args.seed + 1)
        shutil.rmtree(work)
    for n in sorted(args.sizes):
        print(f"== Stage I data, {n:,} patents", flush=True)
        work = Path(args.work) / f"stage1-{n}"
        shutil.rmtree(work, ignore_errors=True)
        stage1_rows.append(stage1(spark, work, n, args.seed))
        shutil.rmtree(work)
    for n in sorted(args.stage2_sizes):
        print(f"== Stage II data, {n:,} patents, k = {args.k}", flush=True)
        work = Path(args.work) / f"stage2-{n}"
        shutil.rmtree(work, ignore_errors=True)
        stage2_rows.append(stage2(spark, work, n, args.seed, args.k, args.model, args.max_length))
        shutil.rmtree(work)

    projection: dict[str, dict] = {}
    if stage1_rows:
        projection["stage1_25_3M_pairs"] = project_to(
            stage1_rows,
            "seconds_stage1_data",
            "patents",
            "pairs_per_patent",
            PAPER_STAGE1_PAIRS,
            cores,
        )
    if stage2_rows:
        projection["stage2_2_67M_examples"] = project_to(
            stage2_rows,
            "seconds_stage2_data",
            "query_views",
            "examples_per_query_view",
            PAPER_STAGE2_EXAMPLES,
            cores,
        ) | {"k": args.k}
    write_result(
        "scaling",
        {
            "machine": machine(args.master),
            "cores": cores,
            "model": args.model,
            "max_length": args.max_length,
            "warmup_patents": args.warmup,
            "stage1": stage1_rows,
            "stage2": stage2_rows,
            "projection": projection,
        },
        args.out,
    )
    plot(stage1_rows, stage2_rows, Path(args.plot))
    for r in stage1_rows:
        print(
            f"Stage I  {r['patents']:>7,} patents: {r['seconds_per_1000_patents']['stage1_data']:.2f}"
            f" s per 1,000 patents, ingest+curate / JSON->Parquet "
            f"{r['ratio_ingest_plus_curate_to_baseline']}x"
        )
    for r in stage2_rows:
        print(
            f"Stage II {r['patents']:>7,} patents: {r['milliseconds_per_query_view']['stage2_data']:.1f}"
            f" ms per query view ({r['query_views']:,} views, k = {r['k']})"
        )
    for name, p in projection.items():
        print(
            f"projection {name}: {p['core_hours']} core-hours (growth exponent {p['growth_exponent']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
