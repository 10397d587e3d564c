"""Benchmark: Stage II candidates + triplets, query views/s with the time split by step and
by k, and the dense-negative step against sentence-transformers' mine_hard_negatives.

Prepares a lake from a generated corpus (default 50,000 patents; generate -> ingest ->
curate -> split, not timed), then times on local[2]: prepare_retrieval, encoding (candidate
TACs and query views, the untrained tiny Qwen3 as mining encoder), BM25 indexing, FAISS
indexing, then mine_candidates and build_triplets at each --k (smallest first; each rerun
replaces the tables). Then, unless --compare-queries 0, on the same model and texts (a sample
of query views against the whole candidate pool), our dense step (encode + FAISS top-k) vs
mine_hard_negatives (encode + FAISS + its filtering, at the largest k), as a ratio.

    python benchmarks/stage2.py --patents 20000 --k 100 500 2000 --compare-queries 0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import empty_folder, machine, prepare_lake, timed, write_result


def dense_comparison(retrieval: Path, model: str, n_queries: int, k: int, max_length: int) -> dict:
    import pyarrow.dataset as ds
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives

    from retrieval.search import DenseIndex
    from trainer.encoder import Encoder, EncoderConfig
    from trainer.models import resolve

    cands = ds.dataset(str(retrieval / "candidates"), format="parquet").to_table(
        columns=["id", "text"]
    )
    queries = (
        ds.dataset(str(retrieval / "queries"), format="parquet")
        .to_table(columns=["key", "text"])
        .slice(0, n_queries)
    )
    corpus = [t[:2000] for t in cands.column("text").to_pylist()]
    qtexts = [t[:2000] for t in queries.column("text").to_pylist()]

    saved = retrieval / "st_model"  # the same weights in the layout SentenceTransformer loads
    Encoder.from_pretrained(
        resolve(model),
        EncoderConfig(pooling="last", max_length=max_length, query_instruction=False),
    ).save(str(saved))
    encoder = Encoder.from_pretrained(str(saved))
    start = time.perf_counter()
    cvec = encoder.encode_passage(corpus, 64).numpy()
    qvec = encoder.encode_passage(qtexts, 64).numpy()
    DenseIndex.build(cands.column("id").to_pylist(), cvec).search(qvec, k)
    ours = time.perf_counter() - start

    st = SentenceTransformer(str(saved), device="cpu")
    st.max_seq_length = max_length
    pairs = Dataset.from_dict({"anchor": qtexts, "positive": corpus[: len(qtexts)]})
    start = time.perf_counter()
    mine_hard_negatives(
        pairs,
        st,
        corpus=corpus,
        num_negatives=8,
        range_max=k,
        use_faiss=True,
        batch_size=64,
        output_format="n-tuple",
        verbose=False,
    )
    theirs = time.perf_counter() - start
    return {
        "queries": len(qtexts),
        "corpus": len(corpus),
        "k": k,
        "seconds": {
            "xembed_encode_plus_faiss": round(ours, 2),
            "sentence_transformers_mine_hard_negatives": round(theirs, 2),
        },
        "ratio_xembed_speedup": round(theirs / ours, 3),
    }


def retrieval_steps(
    spark, lake: str, retrieval: Path, model: str, max_length: int, seconds: dict
) -> dict:
    """prepare_retrieval, both encodes ("bench" encoder), the BM25 and FAISS indexes, each
    timed into `seconds`; returns prepare_retrieval's manifest."""
    from evaluation import encode, index
    from spark_jobs import prepare_retrieval

    with timed("prepare_retrieval", seconds):
        manifest = prepare_retrieval.run(spark, lake, str(retrieval))
    for kind in ("tac", "query"):
        with timed(f"encode_{kind}", seconds):
            encode.main(
                [
                    "--model",
                    model,
                    "--retrieval",
                    str(retrieval),
                    "--kind",
                    kind,
                    "--lake",
                    lake,
                    "--encoder-name",
                    "bench",
                    "--batch-size",
                    "64",
                    "--max-length",
                    str(max_length),
                ]
            )
    with timed("bm25_index", seconds):
        index.main(
            [
                "bm25",
                "--collections",
                str(retrieval / "bm25"),
                "--out",
                str(retrieval / "bm25_index"),
            ]
        )
    with timed("faiss_index", seconds):
        index.main(
            ["faiss", "--lake", lake, "--encoder", "bench", "--out", str(retrieval / "faiss")]
        )
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--patents", type=int, default=50_000)
    parser.add_argument(
        "--k", type=int, nargs="+", default=[200], help="candidates per query view (paper: 2000)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--model", default="builtin:qwen3-tiny")
    parser.add_argument(
        "--triplets-k",
        type=int,
        nargs="*",
        default=None,
        help="run build_triplets only after mining at these k (default: every k)",
    )
    parser.add_argument(
        "--compare-queries", type=int, default=2000, help="0: skip the mine_hard_negatives run"
    )
    parser.add_argument(
        "--validation-size",
        type=int,
        default=None,
        help="build_triplets' validation examples (default: the paper's 2,000, or a tenth of "
        "--patents on a smaller corpus, where 2,000 would leave nothing to train on)",
    )
    parser.add_argument("--max-length", type=int, default=256, help="encoder max tokens")
    parser.add_argument("--work", default=str(Path(__file__).resolve().parent / "work" / "stage2"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.validation_size is None:
        args.validation_size = min(2000, max(1, args.patents // 10))

    from lake import build_session
    from spark_jobs import build_triplets, mine_candidates

    work = empty_folder(args.work)
    spark = build_session("xembed-bench-stage2", args.master)
    lake, retrieval = str(work / "lake"), work / "retrieval"
    prep: dict[str, float] = {}
    with timed("prepare_lake", prep):
        prepare_lake(spark, work, args.patents, args.seed)

    steps: dict[str, float] = {}
    manifest = retrieval_steps(spark, lake, retrieval, args.model, args.max_length, steps)
    views = manifest["query_views"]
    by_k = {}
    for k in sorted(args.k):
        seconds: dict[str, float] = {}
        with timed("mine_candidates", seconds):
            mined = mine_candidates.run(spark, lake, str(retrieval), "bench", k=k)
        built = {}
        if args.triplets_k is None or k in args.triplets_k:
            with timed("build_triplets", seconds):
                built = build_triplets.run(
                    spark, lake, seed=13, validation_size=args.validation_size
                )
        by_k[str(k)] = {
            "seconds": seconds,
            "candidate_rows": mined["candidate_rows"],
            "stored_rows": mined["query_views"],
            "stored_bytes": spark.sql(
                f"DESCRIBE DETAIL delta.`{lake}/gold/stage2_candidates`"
            ).first()["sizeInBytes"],
            "query_views_per_second_mining": round(views / seconds["mine_candidates"], 2),
        }
        if built:
            by_k[str(k)].update(
                examples=built["examples"],
                validation_examples=built["validation_examples"],
                query_views_per_second_triplets=round(views / seconds["build_triplets"], 2),
            )
        entry = by_k[str(k)]
        print(
            f"k={k}: mining {entry['query_views_per_second_mining']} query views/s, "
            f"{mined['candidate_rows']:,} candidates in {mined['query_views']:,} rows"
            + (f", build_triplets {entry['query_views_per_second_triplets']}/s" if built else "")
        )
    largest = by_k[str(max(args.k))]
    total = sum(steps.values()) + sum(largest["seconds"].values())
    end_to_end = round(views / total, 2) if "build_triplets" in largest["seconds"] else None
    comparison = (
        dense_comparison(retrieval, args.model, args.compare_queries, max(args.k), args.max_length)
        if args.compare_queries
        else None
    )
    write_result(
        "stage2",
        {
            "machine": machine(args.master),
            "patents": args.patents,
            "k": sorted(args.k),
            "model": args.model,
            "max_length": args.max_length,
            "candidate_pool": manifest["candidates"],
            "query_views": views,
            "seconds": {**prep, **steps, "candidates_plus_triplets_at_largest_k": round(total, 2)},
            "by_k": by_k,
            "query_views_per_second_at_largest_k": end_to_end,
            "dense_step_vs_mine_hard_negatives": comparison,
        },
        args.out,
    )
    if end_to_end:
        print(f"{end_to_end} query views/s end to end at k={max(args.k)}")
    if comparison:
        print(f"dense step speed-up vs mine_hard_negatives: {comparison['ratio_xembed_speedup']}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
