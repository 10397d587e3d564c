"""Benchmark: xembed trainer (cpu-small) vs sentence-transformers' own trainer, examples/s on CPU.

Same model (the tiny Qwen3 encoder, trained fully), same data (a generated Stage I shard),
same batch size, max length and steps; ours runs InfoNCE + false-negative masking +
Matryoshka (64, full), theirs MultipleNegativesRankingLoss (scale 1/0.1) wrapped in
MatryoshkaLoss (64, full). Writes benchmarks/results/trainer_cpu.json with the ratio.

    python benchmarks/trainer_cpu.py --steps 40
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # tests.sample_shards
from _common import machine, write_result

ROOT = Path(__file__).resolve().parents[1]


def ours(shard: str, out: Path, steps: int, batch: int, max_length: int) -> float:
    from trainer import train

    train.main(
        [
            str(ROOT / "configs" / "cpu-small.yaml"),
            "--train_data",
            shard,
            "--output_dir",
            str(out),
            "--max_steps",
            str(steps),
            "--per_device_train_batch_size",
            str(batch),
            "--max_length",
            str(max_length),
            "--eval_strategy",
            "no",
            "--save_strategy",
            "no",
            "--load_best_model_at_end",
            "false",
            "--disable_tqdm",
            "true",
            "--validation_size",
            "0",
            "--query_instruction",
            "false",
            "--logging_steps",
            str(steps),
        ]
    )
    return _runtime_from_log(out)


def _runtime_from_log(out: Path) -> float:
    return float(json.loads((out / "registry.json").read_text())["train_metrics"]["train_runtime"])


def theirs(shard: str, base: str, out: Path, steps: int, batch: int, max_length: int) -> float:
    import pyarrow.dataset as ds
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import (
        MatryoshkaLoss,
        MultipleNegativesRankingLoss,
    )

    table = ds.dataset(shard, format="parquet").to_table(columns=["anchor_text", "positive_text"])
    data = Dataset.from_dict(
        {
            "anchor": [t[:2000] for t in table["anchor_text"].to_pylist()],
            "positive": [t[:2000] for t in table["positive_text"].to_pylist()],
        }
    )
    model = SentenceTransformer(base, device="cpu")
    model.max_seq_length = max_length
    loss = MatryoshkaLoss(
        model,
        MultipleNegativesRankingLoss(model, scale=10.0),
        matryoshka_dims=[model.get_embedding_dimension(), 64],
        matryoshka_weights=[0.4, 0.6],
    )
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=1e-3,
        warmup_steps=5,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        logging_steps=steps,
        seed=13,
        dataloader_num_workers=0,
        batch_sampler="no_duplicates",
    )
    result = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=data, loss=loss
    ).train()
    return float(result.metrics["train_runtime"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--patents", type=int, default=1500)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from tests.sample_shards import write_sample_stage1_shards
    from trainer.encoder import Encoder, EncoderConfig
    from trainer.models import resolve

    work = Path(tempfile.mkdtemp(prefix="xembed-bench-trainer-"))
    try:
        shard = str(work / "shard")
        write_sample_stage1_shards(shard, n_patents=args.patents)
        base = work / "base"  # the tiny Qwen3 in the layout SentenceTransformer loads
        Encoder.from_pretrained(
            resolve("builtin:qwen3-tiny"), EncoderConfig(pooling="last", max_length=args.max_length)
        ).save(str(base))
        theirs_s = theirs(shard, str(base), work / "st", args.steps, args.batch, args.max_length)
        ours_s = ours(shard, work / "ours", args.steps, args.batch, args.max_length)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    examples = args.steps * args.batch
    ratio = round(theirs_s / ours_s, 3)
    write_result(
        "trainer_cpu",
        {
            "machine": machine(),
            "model": "builtin:qwen3-tiny (full fine-tuning)",
            "steps": args.steps,
            "batch": args.batch,
            "max_length": args.max_length,
            "seconds": {"xembed": round(ours_s, 2), "sentence_transformers": round(theirs_s, 2)},
            "examples_per_second": {
                "xembed": round(examples / ours_s, 2),
                "sentence_transformers": round(examples / theirs_s, 2),
            },
            "ratio_xembed_to_sentence_transformers_throughput": ratio,
        },
        args.out,
    )
    print(f"xembed / sentence-transformers examples/s = {ratio}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
