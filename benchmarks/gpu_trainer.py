"""GPU benchmark: training throughput of a Qwen3-0.6B-shaped encoder at length 4,096 in bf16.

Random weights with the exact Qwen3-Embedding-0.6B shape (no download), LoRA r=64 on all
linear layers as in the paper profile, the xembed loss (InfoNCE + masking + Matryoshka
64/1024) on query/positive batches of random tokens. Reports tokens/s, peak GPU memory and
MFU against the GPU's dense bf16 peak (--peak-tflops; H200/H100 SXM: 989).

    python benchmarks/gpu_trainer.py --batch 4 --length 4096 --steps 10
    python benchmarks/gpu_trainer.py --smoke   # the same code, a 2-layer model, CPU, 2 steps

FLOPs per token are counted as 2N forward + 4N backward over the N = all backbone
parameters (activation gradients flow through frozen weights too; LoRA's own weight
gradients are negligible) plus causal attention, so MFU is comparable to full fine-tuning
numbers. Needs CUDA; exits 2 without it (``--smoke`` runs anywhere and writes nothing).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

QWEN3_0_6B = {
    "hidden_size": 1024,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 3072,
    "vocab_size": 151669,
    "max_position_embeddings": 32768,
    "rope_theta": 1_000_000,
}
# --smoke: the same architecture, small enough for two CPU steps in seconds
SMOKE = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--batch", type=int, default=4, help="queries per step (plus as many positives)"
    )
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--no-gradient-checkpointing", action="store_true")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="check the benchmark runs: two steps of a 2-layer model on the CPU, nothing written",
    )
    args = parser.parse_args(argv)

    import torch
    from transformers import Qwen3Config, Qwen3Model

    if not args.smoke and not torch.cuda.is_available():
        print(
            "no CUDA device: this benchmark needs a GPU (--smoke runs on the CPU)", file=sys.stderr
        )
        return 2
    device = "cpu" if args.smoke else "cuda"
    from trainer.encoder import Encoder, EncoderConfig
    from trainer.loss import InfoNCELoss, MatryoshkaLoss
    from trainer.models import qwen3_tokenizer

    torch.manual_seed(0)
    shape = {**QWEN3_0_6B, **SMOKE} if args.smoke else QWEN3_0_6B
    config = Qwen3Config(**shape, attn_implementation="sdpa")
    model = Qwen3Model(config).to(dtype=torch.bfloat16, device=device)
    n_params = sum(p.numel() for p in model.parameters())
    encoder = Encoder(
        model, qwen3_tokenizer(), EncoderConfig(pooling="last", max_length=args.length)
    )
    encoder.add_lora(r=64, alpha=32)
    if not args.no_gradient_checkpointing:
        # what the HF Trainer calls for --gradient_checkpointing
        encoder.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": False}
        )
    encoder.train()
    loss_fn = MatryoshkaLoss(InfoNCELoss(0.1, 0.2), [64, None], [0.6, 0.4])
    optim = torch.optim.AdamW([p for p in encoder.parameters() if p.requires_grad], lr=1e-4)

    def batch():
        ids = torch.randint(0, 150_000, (args.batch, args.length), device=device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def step():
        q, p = encoder(**batch()), encoder(**batch())
        loss = loss_fn(q.float(), p.float())
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        return loss.item()

    if args.smoke:
        before = [p.detach().clone() for p in encoder.parameters() if p.requires_grad]
        losses = [step() for _ in range(2)]
        after = [p for p in encoder.parameters() if p.requires_grad]
        moved = sum(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
        if not all(map(math.isfinite, losses)) or moved == 0:
            print(f"smoke: losses {losses}, {moved} trainable tensors moved", file=sys.stderr)
            return 1
        print(f"smoke: 2 steps, losses {losses[0]:.4f} {losses[1]:.4f}, {moved} tensors moved")
        return 0

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = 2 * args.batch * args.length * args.steps
    attention = (
        12
        * config.num_hidden_layers
        * config.num_attention_heads
        * config.head_dim
        * args.length
        / 2
    )
    flops_per_token = 6 * n_params + attention
    achieved = tokens / seconds * flops_per_token / 1e12
    write_result(
        "gpu_trainer",
        {
            "machine": machine(),
            "gpu": torch.cuda.get_device_name(0),
            "model": "Qwen3-0.6B shape, random weights, LoRA r=64 all-linear, bf16",
            "batch_queries": args.batch,
            "length": args.length,
            "steps": args.steps,
            "gradient_checkpointing": not args.no_gradient_checkpointing,
            "parameters": n_params,
            "seconds": round(seconds, 3),
            "tokens_per_second": round(tokens / seconds, 1),
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "achieved_tflops": round(achieved, 1),
            "mfu": round(achieved / args.peak_tflops, 4),
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
