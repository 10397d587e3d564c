"""Contrastive losses whose maths runs on embeddings alone (tests feed tensors directly).

InfoNCE over the example's positive, its hard negatives and every other example's positive
and negatives in the batch (gathered across processes under DDP), with false-negative
masking; Matryoshka wraps any such loss over truncated, re-normalised prefixes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional


class _GatherWithGradient(torch.autograd.Function):
    """All-gather along dim 0 whose backward hands every rank the gradient that *all* ranks'
    losses put on its slice (an all-reduce of the full gradient, then this rank's rows), so
    under DDP's gradient averaging the update equals one process's over the global batch.
    Only all_gather and all_reduce: both exist on gloo (CPU) and NCCL."""

    @staticmethod
    def forward(ctx, t: torch.Tensor) -> torch.Tensor:
        ctx.rank, ctx.rows = dist.get_rank(), t.shape[0]
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def _gather(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """All-gather ``t`` along dim 0 with gradients across ranks; returns (gathered, offset)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return t, 0
    return _GatherWithGradient.apply(t), dist.get_rank() * t.shape[0]


class InfoNCELoss(nn.Module):
    """InfoNCE with temperature and false-negative masking.

    For query i, the candidates are all positives and all hard negatives of the (global)
    batch; the target is its own positive. A candidate whose similarity exceeds the
    positive's by more than ``margin`` is treated as an unlabelled positive and removed
    from the denominator (the paper's masking, delta = 0.2). ``margin=None`` disables it.
    """

    def __init__(self, temperature: float = 0.1, margin: float | None = 0.2, gather: bool = True):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = temperature
        self.margin = margin
        self.gather = gather

    def compute_loss_from_embeddings(
        self, queries: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor | None = None
    ) -> torch.Tensor:
        """queries, positives: (B, d); negatives: (B, k, d) or None. Embeddings L2-normalised."""
        candidates = (
            positives
            if negatives is None
            else torch.cat([positives, negatives.reshape(-1, negatives.shape[-1])])
        )
        offset = 0
        if self.gather:
            positives_all, offset = _gather(positives)
            candidates = (
                positives_all
                if negatives is None
                else torch.cat(
                    [positives_all, _gather(negatives.reshape(-1, negatives.shape[-1]))[0]]
                )
            )
        sims = queries @ candidates.T  # (B, C)
        targets = torch.arange(queries.shape[0], device=queries.device) + offset
        if self.margin is not None:
            positive_sim = sims.gather(1, targets[:, None])
            masked = sims > positive_sim + self.margin
            masked[torch.arange(len(targets)), targets] = False
            sims = sims.masked_fill(masked, float("-inf"))
        return functional.cross_entropy(sims / self.temperature, targets)

    def forward(self, queries, positives, negatives=None):
        return self.compute_loss_from_embeddings(queries, positives, negatives)


class MatryoshkaLoss(nn.Module):
    """Weighted sum of ``loss`` at each prefix dimension (truncate, then re-normalise)."""

    def __init__(self, loss: InfoNCELoss, dims: list[int | None], weights: list[float]):
        super().__init__()
        if len(dims) != len(weights):
            raise ValueError(f"{len(dims)} Matryoshka dims but {len(weights)} weights")
        self.loss = loss
        self.dims = dims  # None = full dimension
        self.weights = weights

    @staticmethod
    def truncate(x: torch.Tensor | None, dim: int | None) -> torch.Tensor | None:
        if x is None or dim is None or dim >= x.shape[-1]:
            return x
        return functional.normalize(x[..., :dim], dim=-1)

    def compute_loss_from_embeddings(self, queries, positives, negatives=None) -> torch.Tensor:
        total = queries.new_zeros(())
        for dim, weight in zip(self.dims, self.weights, strict=True):
            total = total + weight * self.loss.compute_loss_from_embeddings(
                self.truncate(queries, dim),
                self.truncate(positives, dim),
                self.truncate(negatives, dim),
            )
        return total

    def forward(self, queries, positives, negatives=None):
        return self.compute_loss_from_embeddings(queries, positives, negatives)
