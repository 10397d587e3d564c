"""Encode texts with an xembed (or any HF) encoder into a Parquet file of embeddings.

    python -m trainer.encode --model models/s1 --input texts.parquet --out emb.parquet \\
        [--id-column id] [--text-column text] [--lang-column lang --query] [--dims 64]

Input: Parquet file/folder or JSON lines with an id and a text column. ``--query`` adds the
language-specific instruction (Qwen3-Embedding convention; documents get none). Output:
``id`` and ``embedding`` (float32 list, L2-normalised, truncated to ``--dims`` if given).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import torch.nn.functional as F

from trainer.encoder import Encoder
from trainer.models import resolve


def read_table(path: str, columns: list[str]) -> pa.Table:
    fmt = "json" if path.endswith((".jsonl", ".json")) else "parquet"
    return ds.dataset(path, format=fmt).to_table(columns=columns)


def encode_table(
    encoder: Encoder,
    table: pa.Table,
    text_column: str,
    lang_column: str | None,
    query: bool,
    batch_size: int,
    dims: int | None,
):
    texts = table.column(text_column).to_pylist()
    if query:
        langs = table.column(lang_column).to_pylist() if lang_column else None
        emb = encoder.encode_query(texts, langs, batch_size)
    else:
        emb = encoder.encode_passage(texts, batch_size)
    if dims:
        emb = F.normalize(emb[:, :dims], dim=-1)
    return emb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", required=True, help="model folder or builtin:minilm / builtin:qwen3-tiny"
    )
    parser.add_argument("--input", required=True)
    parser.add_argument("--out", required=True, help="output Parquet file")
    parser.add_argument("--id-column", default="id")
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--lang-column", default=None)
    parser.add_argument("--query", action="store_true", help="encode as queries (with instruction)")
    parser.add_argument("--dims", type=int, default=None, help="keep the first N dims (Matryoshka)")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    if args.query and not args.lang_column:
        print("note: --query without --lang-column uses the English instruction", file=sys.stderr)

    encoder = Encoder.from_pretrained(resolve(args.model))
    columns = [args.id_column, args.text_column] + ([args.lang_column] if args.lang_column else [])
    table = read_table(args.input, columns)
    emb = encode_table(
        encoder, table, args.text_column, args.lang_column, args.query, args.batch_size, args.dims
    )
    out = pa.table(
        {
            "id": table.column(args.id_column),
            "embedding": pa.array(emb.numpy().tolist(), type=pa.list_(pa.float32())),
        }
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(out, args.out)
    print(f"encoded {len(table):,} texts -> {args.out} ({emb.shape[1]} dims)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
