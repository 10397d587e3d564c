"""PHAGE training data: claim graphs streamed from ``export_training --dataset phage`` shards.

One example is one patent in one claim language: its claims in claim-number order, the
``silver/claim_graph`` edges between them (as claim indices) and its IPC subclasses, the
taxonomy contrast's labels. Batches are family-disjoint like every other stage's, and the
stream puts two patents of different families that share their first IPC subclass next to
each other (:func:`subclass_pairs`), so a batch holds taxonomy positives although the
corpus has many subclasses.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from trainer.data import BatchStream, read_manifest, shard_rows
from trainer.phage import ClaimGraph

DATASET = "phage"
_FAMILY_COLUMNS = ["family_id", "families", "ipc_subclasses"]
_COLUMNS = [*_FAMILY_COLUMNS, "lang", "claim_numbers", "claim_texts", "edges"]


@dataclass(frozen=True)
class PhageExample:
    graph: ClaimGraph
    subclasses: tuple[str, ...]
    families: frozenset[str]
    own_families: None = None  # every family is the example's own (family_disjoint_batches)


def _graph(row: dict, max_chars: int | None) -> ClaimGraph:
    index = {number: i for i, number in enumerate(row["claim_numbers"])}
    edges = tuple(
        (index[e["src_claim"]], index[e["dst_claim"]], e["relation"])
        for e in row["edges"] or ()
        if e["src_claim"] in index and e["dst_claim"] in index
    )
    claims = tuple(t[:max_chars] if max_chars else t for t in row["claim_texts"])
    return ClaimGraph(claims, edges)


def read_phage_examples(
    folder: str,
    max_chars: int | None = None,
    shard_order_seed: int | None = None,
    families_only: bool = False,
) -> Iterator[PhageExample]:
    """Examples of every shard (``families_only``: without claims, for counting batches)."""
    dataset = read_manifest(folder).get("dataset")
    if dataset != DATASET:
        raise ValueError(
            f"{folder}: --stage phage needs `export_training --dataset phage` shards, "
            f"got dataset {dataset!r}"
        )
    columns = _FAMILY_COLUMNS if families_only else _COLUMNS
    for row in shard_rows(folder, columns, shard_order_seed):
        yield PhageExample(
            graph=ClaimGraph(()) if families_only else _graph(row, max_chars),
            subclasses=tuple(row["ipc_subclasses"] or ()),
            families=frozenset(row.get("families") or [row["family_id"]]),
        )


def subclass_pairs(examples: Iterable[PhageExample], buffer_size: int = 4096) -> Iterator:
    """The examples reordered so that an example whose first IPC subclass matches an earlier,
    still waiting example of another family follows it directly; examples without a mate go
    on after ``buffer_size`` others wait, or at the end, in reading order. Deterministic."""
    waiting: dict[str, PhageExample] = {}  # first subclass -> the example waiting for a mate
    for example in examples:
        key = example.subclasses[0] if example.subclasses else None
        mate = waiting.get(key) if key else None
        if key is None or (mate is not None and not mate.families.isdisjoint(example.families)):
            yield example
            continue
        if mate is not None:
            del waiting[key]
            yield mate
            yield example
            continue
        waiting[key] = example
        if len(waiting) > buffer_size:
            oldest = next(iter(waiting))
            yield waiting.pop(oldest)
    yield from waiting.values()


class PhageStream(BatchStream):
    """Family-disjoint batches of claim graphs, taxonomy mates side by side."""

    reader = staticmethod(read_phage_examples)

    def order(self, examples: Iterator) -> Iterator:
        return subclass_pairs(examples, self.buffer_size)
