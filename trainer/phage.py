"""PHAGE (``papers/000_…``, third abstract): claim-graph-guided fine-tuning of a BERT-style
encoder that leaves a plain encoder.

During training a patent's claims are one input sequence with known claim spans, and every
self-attention layer gets a token-level additive bias built from ``silver/claim_graph``:

- a **connectivity mask**: a token attends to tokens of its own claim and of the claims
  joined to it by an edge of any relation (in both directions); special and prompt tokens
  (``[CLS]``, ``passage:``) see and are seen by every token;
- a **learnable bias per relation type and head** (``relation_bias[r, h]``), added where two
  tokens' claims are joined by a relation-``r`` edge, so legal and technical edges are
  weighted apart (zero at the start: the first step is the plain encoder under the mask).

The objective (:func:`phage_loss`) is dual-granularity: inter-patent taxonomy contrast
(patents sharing an IPC subclass are positives, the rest of the batch negatives) plus
intra-patent topology contrast (a claim's embedding against its graph neighbours versus the
patent's other claims), weighted by the config. :meth:`PhageEncoder.save` writes the
encoder alone: the mask and biases are no part of the saved model, which
``SentenceTransformer(path)`` loads and which encodes with no graph.

Only for BERT-style encoders (multilingual-e5, BERT, (XLM-)RoBERTa): their bidirectional
attention takes an additive mask; decoder models (Qwen3) are refused.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from schemas.defaults import CLAIM_RELATIONS, PHAGE_MODEL_TYPES
from trainer.encoder import Encoder, format_passage, token_prefixes
from trainer.loss import MatryoshkaLoss

ATTENTION = "xembed_phage"
GLOBAL = -1  # claim index of tokens outside every claim (special and prompt tokens)

# the bias of the batch being encoded, (batch, heads, L, L); None outside a PHAGE forward
_BIAS: contextvars.ContextVar[torch.Tensor | None] = contextvars.ContextVar(
    "xembed_phage_bias", default=None
)


def _phage_attention(module, query, key, value, attention_mask, **kwargs):
    """SDPA with the current claim-graph bias added to the model's own (padding) mask."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    bias = _BIAS.get()
    if bias is not None:
        bias = bias.to(query.dtype)
        if attention_mask is None:
            attention_mask = bias
        elif attention_mask.dtype == torch.bool:
            blocked = torch.finfo(query.dtype).min
            attention_mask = torch.where(attention_mask, 0.0, blocked).to(query.dtype) + bias
        else:
            attention_mask = attention_mask + bias
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def _register() -> None:
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(ATTENTION, _phage_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)


@dataclass(frozen=True)
class ClaimGraph:
    """One patent's claims (in order) and its typed edges between claim *indices*."""

    claims: tuple[str, ...]
    edges: tuple[tuple[int, int, str], ...] = ()  # (src index, dst index, relation)


def tokenize_claims(
    tokenizer, graph: ClaimGraph, max_length: int, prefix: str = ""
) -> tuple[list[int], list[int]]:
    """Token ids of ``prefix`` + the claims joined by newlines, and each token's claim index
    (:data:`GLOBAL` for special and prefix tokens): the claim holding the token's last
    character (a SentencePiece token's span may start at the space before a word). Claims
    cut off by ``max_length`` keep the tokens that fit."""
    starts, text = [], prefix
    for i, claim in enumerate(graph.claims):
        text += "\n" if i else ""
        starts.append(len(text))
        text += claim
    ends = [s + len(c) for s, c in zip(starts, graph.claims, strict=True)]
    text = token_prefixes(tokenizer, [text], max_length)[0]  # a prefix: the offsets hold
    encoded = tokenizer(text, truncation=True, max_length=max_length, return_offsets_mapping=True)
    owners = []
    for start, end in encoded["offset_mapping"]:
        owner = GLOBAL
        if end > start:
            owner = next(
                (i for i, (s, e) in enumerate(zip(starts, ends, strict=True)) if s < end <= e),
                GLOBAL,
            )
        owners.append(owner)
    return list(encoded["input_ids"]), owners


def _claim_onehot(claim_of_token: torch.Tensor, n_claims: int, dtype) -> torch.Tensor:
    """(L, n_claims) membership of each token in its claim; :data:`GLOBAL` tokens are all 0."""
    onehot = functional.one_hot(claim_of_token.clamp(min=0), n_claims).to(dtype)
    return onehot * (claim_of_token >= 0).unsqueeze(-1).to(dtype)


def graph_bias(
    claim_of_token: torch.Tensor,
    edges: Sequence[tuple[int, int, str]],
    relation_bias: torch.Tensor,
    relations: Sequence[str] = CLAIM_RELATIONS,
    connectivity: bool = True,
) -> torch.Tensor:
    """The additive attention bias (heads, L, L) of one sequence.

    ``bias[h, i, j]`` is the sum of ``relation_bias[r, h]`` over the relations ``r`` of the
    edges joining token i's and token j's claims (either direction); with ``connectivity``,
    pairs of tokens in different, unjoined claims get the dtype's minimum (blocked)."""
    length = claim_of_token.shape[0]
    n_claims = int(claim_of_token.max().item()) + 1 if length else 0
    size = max(n_claims, 1)
    onehot = _claim_onehot(claim_of_token, size, relation_bias.dtype)  # (L, C)
    # on the inputs' device: the Trainer has moved them to the GPU
    joined = torch.zeros(
        len(relations), size, size, device=claim_of_token.device, dtype=relation_bias.dtype
    )
    for src, dst, relation in edges:
        if src < n_claims and dst < n_claims:  # edges to claims cut off by truncation drop
            r = relations.index(relation)
            joined[r, src, dst] = joined[r, dst, src] = 1.0
    per_relation = torch.einsum("ic,rcd,jd->rij", onehot, joined, onehot)  # (R, L, L)
    bias = torch.einsum("rh,rij->hij", relation_bias, per_relation)
    if connectivity:
        same = claim_of_token.unsqueeze(0) == claim_of_token.unsqueeze(1)
        outside = (claim_of_token < 0).unsqueeze(0) | (claim_of_token < 0).unsqueeze(1)
        allowed = same | outside | (per_relation.sum(0) > 0)
        bias = bias.masked_fill(~allowed, torch.finfo(bias.dtype).min)
    return bias


class PhageEncoder(nn.Module):
    """An :class:`~trainer.encoder.Encoder` trained under claim-graph attention."""

    def __init__(
        self,
        encoder: Encoder,
        relations: Sequence[str] = CLAIM_RELATIONS,
        connectivity: bool = True,
        graph: bool = True,
    ):
        """``graph=False``: the no-graph control, plain attention (no mask, no relation bias:
        the biases stay zero and frozen) under the same inputs and objective."""
        super().__init__()
        config = encoder.base_model.config
        model_type = getattr(config, "model_type", None)
        if model_type not in PHAGE_MODEL_TYPES:
            raise ValueError(
                "PHAGE graph attention needs a BERT-style encoder "
                f"({', '.join(PHAGE_MODEL_TYPES)}); got model_type {model_type!r} (the DAG: set "
                "params.phage_base_model, e.g. builtin:me5-small)"
            )
        if encoder.encoder_config.pooling != "mean":
            raise ValueError(
                "PHAGE trains BERT-style encoders, which pool by mean; the config asks for "
                f"{encoder.encoder_config.pooling!r} pooling (a decoder profile's setting? then "
                "set pooling auto in the config's phage section; or a base model pooled by "
                "another rule: PHAGE needs one pooled by mean)"
            )
        self.encoder = encoder
        self.relations = tuple(relations)
        self.connectivity = connectivity
        self.graph = graph
        self.relation_bias = nn.Parameter(
            torch.zeros(len(relations), config.num_attention_heads), requires_grad=graph
        )
        self._plain_attention = config._attn_implementation
        _register()
        encoder.base_model.set_attn_implementation(ATTENTION)

    def activation_checkpointing_enable(self, **kwargs) -> None:  # the HF Trainer's hook
        raise ValueError(
            "PHAGE: the claim-graph bias exists only during the forward pass, so gradient "
            "checkpointing would recompute attention without it; set activation_checkpointing false"
        )

    def batch(self, graphs: Sequence[ClaimGraph]) -> dict:
        """Padded ids, mask and claim indices of a batch of patents (passage prompt first)."""
        prefix = format_passage("", self.encoder.encoder_config)
        rows = [
            tokenize_claims(
                self.encoder.tokenizer, g, self.encoder.encoder_config.max_length, prefix
            )
            for g in graphs
        ]
        length = max(len(ids) for ids, _ in rows)
        pad = self.encoder.tokenizer.pad_token_id
        ids = torch.full((len(rows), length), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        owners = torch.full((len(rows), length), GLOBAL, dtype=torch.long)
        for b, (row_ids, row_owners) in enumerate(rows):
            ids[b, : len(row_ids)] = torch.tensor(row_ids)
            mask[b, : len(row_ids)] = 1
            owners[b, : len(row_owners)] = torch.tensor(row_owners)
        return {"input_ids": ids, "attention_mask": mask, "claim_of_token": owners}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        claim_of_token: torch.Tensor,
        edges: Sequence[Sequence[tuple[int, int, str]]],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(patent embeddings (B, D), token hidden states (B, L, D)) under the graph bias."""
        bias = None
        if self.graph:
            bias = torch.stack(
                [
                    graph_bias(
                        owners, row_edges, self.relation_bias, self.relations, self.connectivity
                    )
                    for owners, row_edges in zip(claim_of_token, edges, strict=True)
                ]
            )
        token = _BIAS.set(bias)
        try:
            hidden = self.encoder.backbone(
                input_ids=input_ids, attention_mask=attention_mask
            ).last_hidden_state
        finally:
            _BIAS.reset(token)
        return self.encoder.pool(hidden, attention_mask), hidden

    def save(self, path: str) -> None:
        """The plain encoder: its own attention back, no mask, no relation biases."""
        self.encoder.base_model.set_attn_implementation(self._plain_attention)
        try:
            self.encoder.save(path)
        finally:
            self.encoder.base_model.set_attn_implementation(ATTENTION)


def claim_embeddings(hidden: torch.Tensor, claim_of_token: torch.Tensor) -> list[torch.Tensor]:
    """Per patent, the mean hidden state of each claim's tokens (claims, D), L2-normalised;
    a claim cut off entirely by truncation gets no row."""
    out = []
    for states, owners in zip(hidden, claim_of_token, strict=True):
        n = int(owners.max().item()) + 1
        if n <= 0:
            out.append(states.new_zeros((0, states.shape[-1])))
            continue
        onehot = _claim_onehot(owners, n, states.dtype)
        sums = onehot.T @ states
        counts = onehot.sum(0).clamp(min=1).unsqueeze(-1)
        out.append(functional.normalize(sums / counts, dim=-1))
    return out


def taxonomy_loss(
    embeddings: torch.Tensor, subclasses: Sequence[Sequence[str]], temperature: float
) -> torch.Tensor:
    """Supervised contrast: for each patent with a batch-mate sharing an IPC subclass, the
    mean -log-softmax of those positives among all other patents of the batch."""
    sims = embeddings @ embeddings.T / temperature
    n = len(subclasses)
    eye = torch.eye(n, dtype=torch.bool, device=sims.device)
    positive = torch.tensor(
        [
            [i != j and bool(set(subclasses[i]) & set(subclasses[j])) for j in range(n)]
            for i in range(n)
        ],
        device=sims.device,
    )
    log_prob = sims.masked_fill(eye, float("-inf")).log_softmax(dim=1)
    anchors = positive.any(dim=1)
    if not anchors.any():
        return sims.sum() * 0.0
    per_anchor = -(log_prob.masked_fill(~positive, 0.0).sum(1) / positive.sum(1).clamp(min=1))
    return per_anchor[anchors].mean()


def topology_loss(
    claims: Sequence[torch.Tensor],
    edges: Sequence[Sequence[tuple[int, int, str]]],
    temperature: float,
) -> torch.Tensor:
    """Within each patent: a claim's graph neighbours (any relation) against its other claims."""
    losses = []
    for embeddings, row_edges in zip(claims, edges, strict=True):
        n = embeddings.shape[0]
        if n < 2:
            continue
        neighbour = torch.zeros((n, n), dtype=torch.bool, device=embeddings.device)
        for src, dst, _ in row_edges:
            if src < n and dst < n and src != dst:
                neighbour[src, dst] = neighbour[dst, src] = True
        anchors = neighbour.any(dim=1)
        if not anchors.any():
            continue
        eye = torch.eye(n, dtype=torch.bool, device=embeddings.device)
        log_prob = (embeddings @ embeddings.T / temperature).masked_fill(eye, float("-inf"))
        log_prob = log_prob.log_softmax(dim=1)
        per_claim = -(log_prob.masked_fill(~neighbour, 0.0).sum(1) / neighbour.sum(1).clamp(min=1))
        losses.append(per_claim[anchors].mean())
    if not losses:
        return torch.zeros((), device=claims[0].device if claims else None)
    return torch.stack(losses).mean()


class PhageLoss:
    """:func:`phage_loss` with the taxonomy contrast at every Matryoshka dimension (the
    patent embedding cut to ``dim`` and re-normalised; ``None``: the full embedding),
    weighted like Stage I's loss; the topology contrast on the full claim embeddings."""

    def __init__(
        self,
        taxonomy_weight: float = 1.0,
        topology_weight: float = 0.5,
        temperature: float = 0.05,
        dims: Sequence[int | None] = (None,),
        weights: Sequence[float] = (1.0,),
    ):
        if len(dims) != len(weights):
            raise ValueError(f"{len(dims)} Matryoshka dims but {len(weights)} weights")
        self.taxonomy_weight, self.topology_weight = taxonomy_weight, topology_weight
        self.temperature = temperature
        self.dims, self.weights = tuple(dims), tuple(weights)

    def __call__(
        self,
        embeddings: torch.Tensor,
        hidden: torch.Tensor,
        claim_of_token: torch.Tensor,
        subclasses: Sequence[Sequence[str]],
        edges: Sequence[Sequence[tuple[int, int, str]]],
    ) -> tuple[torch.Tensor, dict[str, float]]:
        taxonomy = sum(
            weight
            * taxonomy_loss(MatryoshkaLoss.truncate(embeddings, dim), subclasses, self.temperature)
            for dim, weight in zip(self.dims, self.weights, strict=True)
        )
        topology = topology_loss(claim_embeddings(hidden, claim_of_token), edges, self.temperature)
        total = self.taxonomy_weight * taxonomy + self.topology_weight * topology
        return total, {"taxonomy": float(taxonomy.detach()), "topology": float(topology.detach())}


def phage_loss(
    embeddings: torch.Tensor,
    hidden: torch.Tensor,
    claim_of_token: torch.Tensor,
    subclasses: Sequence[Sequence[str]],
    edges: Sequence[Sequence[tuple[int, int, str]]],
    taxonomy_weight: float = 1.0,
    topology_weight: float = 0.5,
    temperature: float = 0.05,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The dual-granularity objective on the full embedding and its two parts (for logging)."""
    loss = PhageLoss(taxonomy_weight, topology_weight, temperature)
    return loss(embeddings, hidden, claim_of_token, subclasses, edges)
