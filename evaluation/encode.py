"""Encode texts with an xembed (or any HF) encoder into a Parquet file of embeddings.

    python -m evaluation.encode --model models/s1 --input texts.parquet --out emb.parquet \\
        [--id-column id] [--text-column text] [--lang-column lang --query] [--dims 64] \\
        [--device auto|cpu|cuda|cuda:N]
    python -m evaluation.encode --model M --retrieval retrieval --kind tac|query \\
        --lake data/lake --encoder-name miner

With --lake the embeddings go to the Delta table index/embeddings (written by Spark,
replacing the rows of that encoder name and kind) instead of --out.

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
from pyspark.sql import functions as F
from torch.nn import functional

from lake import build_session, fs, label, path_or_uri, positive_int, table_path, write_table
from lake.cli import finish, run_job
from lake.tables import sql_string
from retrieval.search import manifest_digest, record_encoded
from trainer.devices import DEVICE_HELP, device_name, inference_device
from trainer.encoder import Encoder
from trainer.models import resolve

# prepare_retrieval's outputs: kind -> (folder, id column)
MINING_INPUTS = {"tac": ("candidates", "id"), "query": ("queries", "key")}


def read_table(path: str, columns: list[str]) -> pa.Table:
    """``columns`` of the input; a missing column, or a null id or text, is an error naming
    the column, the row and (for a null text) its id."""
    fmt = "json" if path.endswith((".jsonl", ".json")) else "parquet"
    try:
        dataset = ds.dataset(path, format=fmt)
    except FileNotFoundError:  # pyarrow's message is the bare path
        raise FileNotFoundError(f"input {path} does not exist") from None
    missing = [c for c in columns if c not in dataset.schema.names]
    if missing:
        raise ValueError(
            f"{path}: no column {', '.join(map(repr, missing))} (it has "
            f"{', '.join(dataset.schema.names)}; see --id-column / --text-column / --lang-column)"
        )
    table = dataset.to_table(columns=columns)
    for column in columns[:2]:  # id, text
        nulls = table.column(column).null_count
        if nulls:
            row = table.column(column).is_null().to_pylist().index(True)
            which = "" if column == columns[0] else f" (id {table.column(columns[0])[row]})"
            raise ValueError(
                f"{path}: {column} is null in {nulls} rows, the first row {row}{which}"
            )
    return table


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
        emb = functional.normalize(emb[:, :dims], dim=-1)
    return emb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--model", required=True, help="model folder or builtin:minilm / builtin:qwen3-tiny"
    )
    parser.add_argument(
        "--input", type=path_or_uri, default=None, help="Parquet file/folder or JSON lines"
    )
    parser.add_argument(
        "--retrieval",
        type=path_or_uri,
        default=None,
        help="prepare_retrieval output: --kind tac encodes its candidates, --kind query its queries",
    )
    parser.add_argument("--out", type=path_or_uri, default=None, help="output Parquet file")
    parser.add_argument(
        "--lake", type=path_or_uri, default=None, help="write to <lake>/index/embeddings instead"
    )
    parser.add_argument("--master", default=None, help="Spark master of the lake write")
    parser.add_argument(
        "--encoder-name", default=None, type=label, help="encoder name in index/embeddings"
    )
    parser.add_argument(
        "--kind",
        choices=["tac", "query"],
        default=None,
        help="tac: candidate documents; query: query views (implies --query)",
    )
    parser.add_argument("--id-column", default="id")
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--lang-column", default=None)
    parser.add_argument("--query", action="store_true", help="encode as queries (with instruction)")
    parser.add_argument(
        "--dims", type=positive_int, default=None, help="keep the first N dims (Matryoshka)"
    )
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument(
        "--max-length", type=positive_int, default=None, help="override the model's max tokens"
    )
    parser.add_argument("--device", type=device_name, default="auto", help=DEVICE_HELP)
    args = parser.parse_args(argv)
    try:
        device = inference_device(args.device)
    except ValueError as error:
        parser.error(str(error))
    if args.retrieval:
        if not args.kind:
            parser.error("--retrieval needs --kind tac or --kind query")
        folder, args.id_column = MINING_INPUTS[args.kind]
        args.input, args.lang_column = f"{args.retrieval}/{folder}", "lang"
        local = fs.local_path(args.input)
        if local is not None and not local.exists():
            parser.error(
                f"--retrieval {args.retrieval} holds no {folder}/: run "
                f"spark_jobs/prepare_retrieval.py --out {args.retrieval} first"
            )
    if not args.input:
        parser.error("give --input (or --retrieval with --kind)")
    if bool(args.out) == bool(args.lake):
        parser.error("give exactly one of --out (Parquet) or --lake (Delta index/embeddings)")
    if args.lake and not (args.encoder_name and args.kind and args.lang_column):
        parser.error("--lake needs --encoder-name, --kind and --lang-column")
    args.query = args.query or args.kind == "query"
    if args.query and not args.lang_column:
        print("note: --query without --lang-column uses the English instruction", file=sys.stderr)

    columns = [args.id_column, args.text_column] + ([args.lang_column] if args.lang_column else [])
    table = read_table(args.input, columns)  # before the model loads: a bad input fails fast
    encoder = Encoder.for_inference(resolve(args.model), args.device)
    if args.dims and args.dims > encoder.dim:  # the cut would keep them all, under the label
        parser.error(f"--dims {args.dims}: the model's embeddings have {encoder.dim} dims")
    if args.max_length and encoder.limit_length(args.max_length) < args.max_length:
        print(
            f"encode: --max-length {args.max_length}: the model embeds at most "
            f"{encoder.encoder_config.max_length} tokens; longer texts are cut there",
            file=sys.stderr,
        )
    emb = encode_table(
        encoder, table, args.text_column, args.lang_column, args.query, args.batch_size, args.dims
    )
    if args.lake:
        write_lake(
            args.lake,
            args.encoder_name,
            args.kind,
            table.column(args.id_column).to_pylist(),
            table.column(args.lang_column).to_pylist(),
            emb.numpy(),
            args.master,
        )
        target = f"{table_path(args.lake, 'index/embeddings')} (encoder={args.encoder_name}, kind={args.kind})"
        prepared = Path(args.input).parent  # a prepare_retrieval folder, given either way
        if Path(args.input).name == MINING_INPUTS[args.kind][0] and manifest_digest(prepared):
            record_encoded(prepared, args.encoder_name, args.kind)  # checked by mining
    else:
        vectors = pa.array(emb.numpy().tolist(), type=pa.list_(pa.float32()))
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.table({"id": table.column(args.id_column), "embedding": vectors}), args.out
        )
        target = args.out
    print(
        f"encoded {len(table):,} texts on {device} -> {target} ({emb.shape[1]} dims)",
        file=sys.stderr,
    )
    return 0


def write_lake(
    lake: str, encoder: str, kind: str, ids: list, langs: list, vectors, master: str | None = None
) -> None:
    """Write embeddings to index/embeddings through Spark (the lake's one writer)."""
    import pandas as pd

    spark = build_session("xembed-encode", master)
    rows = pd.DataFrame({"id": ids, "lang": langs, "embedding": [v.tolist() for v in vectors]})
    frame = spark.createDataFrame(rows, "id string, lang string, embedding array<float>")
    frame = frame.select(
        F.lit(encoder).alias("encoder"), F.lit(kind).alias("kind"), "id", "lang", "embedding"
    )
    write_table(
        spark,
        frame,
        lake,
        "index/embeddings",
        replace_where=f"encoder = {sql_string(encoder)} AND kind = {sql_string(kind)}",
    )


if __name__ == "__main__":
    finish(run_job("encode", main))
