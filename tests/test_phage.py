"""PHAGE graph attention on the real multilingual-e5-small: the bias of a hand-built graph,
equality with the plain encoder when the graph is neutral, the dual-granularity loss, and an
exported model that is a plain encoder."""

import json

import pytest
import torch

from trainer.encoder import Encoder
from trainer.models import resolve
from trainer.phage import (
    GLOBAL,
    ClaimGraph,
    PhageEncoder,
    graph_bias,
    phage_loss,
    taxonomy_loss,
    tokenize_claims,
    topology_loss,
)

BLOCKED = torch.finfo(torch.float32).min

GRAPHS = [
    ClaimGraph(
        ("A rotor blade with a carbon spar cap.", "The blade of claim 1, with a foam core."),
        ((1, 0, "legal"),),
    ),
    ClaimGraph(
        (
            "一种转子叶片，包括碳纤维梁帽。",
            "根据权利要求1所述的叶片，还包括泡沫芯。",
            "一种制造转子叶片的方法。",
        ),
        ((1, 0, "legal"), (2, 0, "technical")),
    ),
    ClaimGraph(("飲料ディスペンサ。", "請求項１に記載の飲料ディスペンサ。"), ((1, 0, "legal"),)),
]
SUBCLASSES = [["F03D"], ["F03D"], ["B67D"]]


@pytest.fixture(scope="module")
def me5():
    return resolve("builtin:me5-small")


def test_the_bias_of_a_two_claim_graph_is_the_expected_matrix():
    owners = torch.tensor([GLOBAL, 0, 0, 1, GLOBAL])
    relation_bias = torch.tensor([[0.5, -1.0], [2.0, 3.0]])  # (legal, technical) x 2 heads
    bias = graph_bias(owners, [(1, 0, "legal")], relation_bias)
    a, b = 0.5, -1.0
    expected = torch.tensor(
        [
            [  # head 0: claim 0 <-> claim 1 along the legal edge gets legal's bias
                [0, 0, 0, 0, 0],
                [0, 0, 0, a, 0],
                [0, 0, 0, a, 0],
                [0, a, a, 0, 0],
                [0, 0, 0, 0, 0],
            ],
            [
                [0, 0, 0, 0, 0],
                [0, 0, 0, b, 0],
                [0, 0, 0, b, 0],
                [0, b, b, 0, 0],
                [0, 0, 0, 0, 0],
            ],
        ]
    )
    assert torch.equal(bias, expected)
    # a technical edge takes the technical row; no edge blocks the two claims' tokens
    technical = graph_bias(owners, [(1, 0, "technical")], relation_bias)
    assert technical[0, 1, 3] == 2.0 and technical[1, 3, 2] == 3.0
    unjoined = graph_bias(owners, [], relation_bias)
    assert unjoined[0, 1, 3] == BLOCKED and unjoined[1, 3, 1] == BLOCKED
    assert unjoined[0, 0, 3] == 0 and unjoined[0, 1, 2] == 0  # global tokens and own claim
    # without the connectivity mask nothing is blocked
    assert (graph_bias(owners, [], relation_bias, connectivity=False) == 0).all()


def test_the_bias_is_built_on_the_device_of_its_inputs():
    """The Trainer moves claim_of_token and relation_bias to the GPU; a tensor the bias built
    on the default device met them in one einsum and failed on the first CUDA step. The
    'meta' device stands in for the GPU here: it does not check devices itself, so every
    einsum's operands are recorded."""
    from torch.overrides import TorchFunctionMode

    devices = []

    class Operands(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.Tensor.item and args[0].device.type == "meta":
                return 1  # the largest claim index of the owners below
            if func is torch.einsum:
                devices.append({a.device.type for a in args[1:] if isinstance(a, torch.Tensor)})
            return func(*args, **(kwargs or {}))

    owners = torch.tensor([GLOBAL, 0, 0, 1, GLOBAL], device="meta")
    with Operands():
        bias = graph_bias(owners, [(1, 0, "legal")], torch.zeros(2, 2, device="meta"))
    assert bias.device.type == "meta"
    assert devices and all(d == {"meta"} for d in devices), devices


def test_claim_spans_come_from_the_tokenizer_offsets(me5):
    encoder = Encoder.from_pretrained(me5)
    ids, owners = tokenize_claims(encoder.tokenizer, GRAPHS[0], 512, "passage: ")
    tokens = encoder.tokenizer.convert_ids_to_tokens(ids)
    assert owners[0] == GLOBAL and owners[-1] == GLOBAL  # <s> and </s>
    assert all(o == GLOBAL for t, o in zip(tokens, owners, strict=True) if "passage" in t)

    def text_of(claim):
        return encoder.tokenizer.decode([i for i, o in zip(ids, owners, strict=True) if o == claim])

    assert text_of(0) == GRAPHS[0].claims[0] and text_of(1) == GRAPHS[0].claims[1]
    short, cut = tokenize_claims(encoder.tokenizer, GRAPHS[0], 8, "passage: ")
    assert len(short) == 8 and 1 not in cut  # truncation drops the second claim's tokens


def test_a_neutral_graph_gives_the_plain_encoders_forward(me5):
    plain = Encoder.from_pretrained(me5).eval()
    phage = PhageEncoder(Encoder.from_pretrained(me5), connectivity=False).eval()
    batch = phage.batch(GRAPHS)
    edges = [g.edges for g in GRAPHS]
    with torch.no_grad():
        expected = plain.backbone(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state
        _, hidden = phage(**batch, edges=edges)
        assert torch.allclose(hidden, expected, atol=1e-5)
        # the connectivity mask (and then the relation biases) do change the forward pass
        masked = PhageEncoder(Encoder.from_pretrained(me5)).eval()
        _, hidden_masked = masked(**batch, edges=[[] for _ in GRAPHS])
        assert (hidden_masked - expected).abs().max() > 1e-3
        masked.relation_bias.fill_(2.0)
        _, hidden_biased = masked(**batch, edges=edges)
        _, hidden_unbiased = PhageEncoder(Encoder.from_pretrained(me5)).eval()(**batch, edges=edges)
        assert (hidden_biased - hidden_unbiased).abs().max() > 1e-3


def test_the_losses_reward_shared_subclasses_and_graph_neighbours():
    close = torch.nn.functional.normalize(torch.tensor([[1.0, 0.1], [1.0, 0.0], [0.0, 1.0]]), dim=1)
    far = close[[0, 2, 1]]
    subclasses = [["F03D"], ["F03D"], ["B67D"]]
    assert taxonomy_loss(close, subclasses, 0.1) < taxonomy_loss(far, subclasses, 0.1)
    # nobody shares a subclass: no anchor, zero loss
    assert taxonomy_loss(close, [["A"], ["B"], ["C"]], 0.1) == 0
    claims = [close, close]
    assert topology_loss(claims, [[(1, 0, "legal")], []], 0.1) < topology_loss(
        claims, [[(2, 0, "legal")], []], 0.1
    )


def test_training_moves_the_relation_biases_and_exports_a_plain_encoder(me5, tmp_path):
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    phage = PhageEncoder(Encoder.from_pretrained(me5))
    # the hook the HF Trainer calls for --gradient_checkpointing (recomputed attention would
    # lose the graph bias)
    with pytest.raises(ValueError, match="PHAGE: the claim-graph bias exists only"):
        phage.activation_checkpointing_enable(activation_checkpointing_kwargs=None)
    optimizer = torch.optim.AdamW(phage.parameters(), lr=1e-3)
    batch = phage.batch(GRAPHS)
    edges = [g.edges for g in GRAPHS]
    losses = []
    for _ in range(3):
        embeddings, hidden = phage(**batch, edges=edges)
        loss, parts = phage_loss(
            embeddings, hidden, batch["claim_of_token"], SUBCLASSES, edges, 1.0, 0.5
        )
        assert parts["taxonomy"] > 0 and parts["topology"] > 0
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert phage.relation_bias.abs().sum() > 0  # the graph parameters learned

    out = tmp_path / "phage"
    phage.save(str(out))
    saved = json.loads((out / "config.json").read_text())
    assert "phage" not in json.dumps(saved).lower()
    from safetensors.torch import load_file

    assert not [k for k in load_file(str(out / "model.safetensors")) if "relation" in k]
    # the exported model encodes text alone, the same through our encoder and
    # SentenceTransformer, and is not the base model any more
    text = "passage: " + "\n".join(GRAPHS[0].claims)
    ours = Encoder.from_pretrained(str(out)).encode([text])
    st = SentenceTransformer(str(out), device="cpu").encode([text], convert_to_tensor=True)
    assert torch.allclose(ours, st.cpu(), atol=1e-5)
    base = Encoder.from_pretrained(me5).encode([text])
    assert (ours - base).abs().max() > 1e-4
    # after saving, the PHAGE encoder still trains under the graph: patent 1's claims 2 and 3
    # share no edge, so the mask separates them
    again, _ = phage(**batch, edges=edges)
    plain = Encoder.from_pretrained(str(out)).encode(["passage: " + "\n".join(GRAPHS[1].claims)])
    assert (again[1].detach() - plain[0]).abs().max() > 1e-3
