"""Build the Stage II / evaluation indexes.

    python -m evaluation.index bm25  --collections retrieval/bm25 --out retrieval/bm25_index [--threads 2]
    python -m evaluation.index faiss --lake data/lake --encoder NAME --out retrieval/faiss [--type flat|ivf|hnsw]

BM25: one Lucene index per language folder of Pyserini JsonCollection files (zh and ja get
Pyserini's language analyzers, en the default English one), and index.json naming the
languages and the prepared folder's manifest they were built from (its SHA-256). FAISS: an inner-product index
over the encoder's TAC embeddings read from the lake table index/embeddings, with index.json
(encoder, dimensions, documents, and the preparation of the folder it sits in that the
embeddings were encoded from). Each index.json is written last, so a killed build has none.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from pyspark.sql import functions as F

from lake import add_lake_arguments, build_session, positive_int, read_table
from lake.cli import run_job
from retrieval.search import (
    INDEX_INFO,
    INDEX_TYPES,
    DenseIndex,
    build_bm25_index,
    encoded_from,
    manifest_digest,
)


def read_embeddings(
    lake: str, encoder: str, kind: str, master: str | None = None
) -> tuple[list[str], list[str], np.ndarray]:
    """(ids, langs, vectors) of one encoder and kind from index/embeddings, sorted by id."""

    spark = build_session("xembed-index", master)
    rows = (
        read_table(spark, lake, "index/embeddings")
        .where((F.col("encoder") == encoder) & (F.col("kind") == kind))
        .select("id", "lang", "embedding")
        .orderBy("id")
        .toArrow()
    )
    if rows.num_rows == 0:
        raise ValueError(f"index/embeddings has no {kind!r} rows for encoder {encoder!r}")
    flat = rows.column("embedding").combine_chunks()
    vectors = np.asarray(flat.values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(
        rows.num_rows, -1
    )
    return rows.column("id").to_pylist(), rows.column("lang").to_pylist(), vectors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True)
    bm25 = sub.add_parser("bm25", allow_abbrev=False, help="one Lucene index per language")
    bm25.add_argument(
        "--collections", required=True, help="folder with one JsonCollection folder per language"
    )
    bm25.add_argument("--out", required=True)
    bm25.add_argument("--threads", type=positive_int, default=2)
    dense = sub.add_parser(
        "faiss", allow_abbrev=False, help="FAISS index over the encoder's TAC embeddings"
    )
    add_lake_arguments(dense)
    dense.add_argument(
        "--encoder", required=True, help="encoder name used when the embeddings were written"
    )
    dense.add_argument("--out", required=True)
    dense.add_argument("--type", choices=INDEX_TYPES, default="flat")
    args = parser.parse_args(argv)

    if args.command == "bm25":
        langs = sorted(p.name for p in Path(args.collections).iterdir() if p.is_dir())
        if not langs:
            parser.error(f"{args.collections} holds no language folders")
        record = Path(args.out) / INDEX_INFO
        record.unlink(missing_ok=True)  # written last: none beside a killed build
        for lang in langs:
            build_bm25_index(
                str(Path(args.collections) / lang), str(Path(args.out) / lang), lang, args.threads
            )
            print(f"bm25 index {lang}: {Path(args.out) / lang}", file=sys.stderr)
        # the prepare_retrieval / prepare_evaluation output the collections came from
        prepared = manifest_digest(Path(args.collections).parent)
        record.write_text(json.dumps({"languages": langs, "prepared": prepared}, indent=2))
        return 0
    ids, _, vectors = read_embeddings(args.lake, args.encoder, "tac", args.master)
    # inside a prepare_retrieval folder: the preparation its embeddings were encoded from
    encoded = encoded_from(Path(args.out).parent, args.encoder, "tac")
    DenseIndex.build(ids, vectors, args.type).save(args.out, encoder=args.encoder, encoded=encoded)
    print(
        f"faiss {args.type} index over {len(ids):,} x {vectors.shape[1]} -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_job("index", main))
