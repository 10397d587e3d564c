"""Streaming training data: Parquet shards -> examples -> family-disjoint batches.

Shards come from ``spark_jobs/export_training.py`` (a folder with ``_manifest.json``). Rows are
read shard by shard with pyarrow, so 25M pairs never have to fit in memory. Stage I rows have
``anchor_*`` / ``positive_*`` columns; Stage II rows ``query_*``, ``positive_text`` and
``negative_texts``; both a ``families`` list naming every family in the example and
``family_id`` / ``positive_family_id``, the query's (anchor's) and the positive's.
"""

from __future__ import annotations

import json
import random
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from torch.utils.data import IterableDataset


@dataclass(frozen=True)
class Example:
    query: str
    query_lang: str | None
    positive: str
    negatives: tuple[str, ...]
    families: frozenset[str]
    # The query's and the positive's families (None: all of ``families``). No other example
    # of a batch may name them; a family two examples name only among their hard negatives is
    # a negative for both queries and may repeat (see family_disjoint_batches).
    own_families: frozenset[str] | None = None


def read_manifest(folder: str) -> dict:
    path = Path(folder) / "_manifest.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{folder}: no _manifest.json (export the data with spark_jobs/export_training.py)"
        )
    manifest = json.loads(path.read_text())
    audit = manifest.get("leakage_audit") or {}
    if audit.get("status") != "passed":
        raise ValueError(
            f"{folder}: the manifest records no passed leakage audit; export the data with "
            "spark_jobs/export_training.py, which audits every row before writing"
        )
    if manifest.get("format") != "parquet":
        raise ValueError(
            f"{folder}: the trainer reads Parquet shards, got format {manifest.get('format')!r}"
        )
    _check_shards(folder, manifest)
    return manifest


def _check_shards(folder: str, manifest: dict) -> None:
    """The shards are those the audited export wrote: each exists, has the size and holds the
    rows the manifest counted (read from the file system and the Parquet footers, no data). A
    shard replaced, cut or grown after the export holds rows the leakage audit never saw:
    refused before any training. An edit that keeps both the row count and the byte size
    passes here (a content hash would cost a full read of every shard) and fails the page
    checksums when :func:`shard_rows` reads it."""
    for shard in manifest.get("shards", []):
        path = Path(folder) / shard["file"]
        size = path.stat().st_size if path.is_file() else None
        if size is not None and shard.get("bytes") is not None and size != shard["bytes"]:
            raise ValueError(
                f"{folder}: shard {shard['file']} is {size:,} bytes, the audited export wrote "
                f"{shard['bytes']:,}: the shards changed after the export; export the data "
                "again with spark_jobs/export_training.py"
            )
        try:
            rows = pq.ParquetFile(path).metadata.num_rows
        except (OSError, pa.ArrowInvalid) as error:
            raise ValueError(
                f"{folder}: shard {shard['file']} of the manifest cannot be read ({error}); "
                "export the data again with spark_jobs/export_training.py"
            ) from None
        if rows != shard["rows"]:
            raise ValueError(
                f"{folder}: shard {shard['file']} holds {rows:,} rows, the audited export wrote "
                f"{shard['rows']:,}: the shards changed after the export; export the data again "
                "with spark_jobs/export_training.py"
            )


def _cut(text: str, max_chars: int | None) -> str:
    return text[:max_chars] if max_chars else text


_COLUMNS = [
    "anchor_text",
    "anchor_lang",
    "query_text",
    "query_lang",
    "positive_text",
    "negative_texts",
    "family_id",
    "positive_family_id",
    "families",
]


def shard_rows(
    folder: str, columns: list[str], shard_order_seed: int | None = None
) -> Iterator[dict]:
    """Rows (the ``columns`` a shard has) of every shard in the manifest, shard by shard
    (shard order shuffled when a seed is given)."""
    manifest = read_manifest(folder)
    shards = [s["file"] for s in manifest["shards"]]
    if shard_order_seed is not None:
        random.Random(shard_order_seed).shuffle(shards)
    for name in shards:
        # Spark writes a checksum on every page: a shard changed in place after the audit
        # (same size and rows, all _check_shards reads) is refused here, before its rows
        file = pq.ParquetFile(Path(folder) / name, page_checksum_verification=True)
        names = file.schema_arrow.names
        batches = file.iter_batches(batch_size=2048, columns=[c for c in columns if c in names])
        while True:
            try:
                batch = next(batches, None)
            except OSError as error:
                raise ValueError(
                    f"{folder}: shard {name} is damaged ({error}): it changed after the "
                    "audited export; export the data again with spark_jobs/export_training.py"
                ) from None
            if batch is None:
                break
            yield from batch.to_pylist()


def read_examples(
    folder: str,
    max_chars: int | None = None,
    shard_order_seed: int | None = None,
    families_only: bool = False,
) -> Iterator[Example]:
    """Examples of every shard in the manifest (shard order shuffled when a seed is given)."""
    columns = ["family_id", "positive_family_id", "families"] if families_only else _COLUMNS
    for row in shard_rows(folder, columns, shard_order_seed):
        own = own_families(row)
        families = frozenset(row.get("families") or [row["family_id"]]) | (own or frozenset())
        if families_only:
            yield Example("", None, "", (), families, own)
            continue
        yield Example(
            query=_cut(row.get("query_text") or row["anchor_text"], max_chars),
            query_lang=row.get("query_lang") or row.get("anchor_lang"),
            positive=_cut(row["positive_text"], max_chars),
            negatives=tuple(_cut(t, max_chars) for t in (row.get("negative_texts") or ())),
            families=families,
            own_families=own,
        )


def own_families(row: dict) -> frozenset[str] | None:
    """The families of a row's query (anchor) and positive, or None when the shard does not
    say which of its ``families`` those are (Stage II shards exported before the column)."""
    positive = row.get("positive_family_id")
    return frozenset((row["family_id"], positive)) if positive and row.get("family_id") else None


# The rule family_disjoint_batches keeps, in a resumed run's identity (trainer.train): a
# checkpoint trained under another rule skipped other batches than this code would.
BATCHING = "query and positive families disjoint, negative families shared (2026-12-05)"


def validation_batches(
    examples: list, batch_size: int, order: Callable[[Iterator], Iterator] | None = None
) -> list[list]:
    """Every validation example once, in family-disjoint batches, put in the ``order`` the
    training stream puts its examples in (PHAGE: taxonomy mates side by side), so the
    validation loss measures what training optimizes."""
    ordered = list(order(iter(examples))) if order else list(examples)
    return list(
        family_disjoint_batches(ordered, batch_size, buffer_size=len(ordered) + 1, drop_last=False)
    )


def family_disjoint_batches(
    examples: Iterable[Example],
    batch_size: int,
    buffer_size: int = 4096,
    drop_last: bool = True,
    counts: dict[str, int] | None = None,
) -> Iterator[list[Example]]:
    """Batches in which no example names the family of another's query or positive (in-batch
    negatives stay negative): each query's candidates are every positive and hard negative of
    the batch, so a text of its own or its positive's family there would be a false negative.
    Two examples may share a family they both name only among their hard negatives (a family
    mined as a negative of both queries, common for a popular patent): it is a negative for
    both. An example without ``own_families`` counts all its families as its own.

    Examples that would repeat a family wait (at most ``buffer_size`` of them) and go first
    into later batches. A family too frequent for that (more of its examples arrive than
    batches can take) overflows the buffer: such examples are dropped and counted under
    ``dropped_family_overflow`` in ``counts``; every training batch stays full (a short batch
    left a rank of a multi-process step without examples). At the end, what cannot fill a
    batch is dropped and counted under ``dropped_at_end`` (``drop_last``, training) or
    yielded in smaller family-disjoint batches (validation). Deterministic for a given input
    order.
    """
    counts = {} if counts is None else counts
    counts.setdefault("dropped_family_overflow", 0)
    counts.setdefault("dropped_at_end", 0)
    source = iter(examples)
    waiting: deque[Example] = deque()
    exhausted = False
    while True:
        batch: list[Example] = []
        named: set[str] = set()  # every family the batch's examples name
        owned: set[str] = set()  # the families of their queries and positives
        skipped: list[Example] = []
        unscanned = len(waiting)  # what waits goes first, in order
        while len(batch) < batch_size:
            if unscanned:
                example, arriving = waiting.popleft(), False
                unscanned -= 1
            elif not exhausted:
                example, arriving = next(source, None), True
                if example is None:
                    exhausted = True
                    break
            else:
                break
            own = example.own_families or example.families
            if owned.isdisjoint(example.families) and named.isdisjoint(own):
                batch.append(example)
                named.update(example.families)
                owned.update(own)
            elif not arriving or len(waiting) + len(skipped) < buffer_size:
                skipped.append(example)
            else:
                counts["dropped_family_overflow"] += 1
        waiting.extendleft(reversed(skipped))
        if len(batch) < batch_size and (drop_last or not batch):
            counts["dropped_at_end"] += len(batch) + len(waiting)
            return  # the rest cannot fill a family-disjoint batch
        yield batch


# The rule validation_examples holds out by, in a resumed run's identity (trainer.train)
# where no validation folder is given: another rule trained on other examples.
HOLDOUT = (
    "query and positive families of the validation leave training; at most a fifth of the "
    "examples validate (2026-12-07)"
)
MAX_HOLDOUT_SHARE = 5  # validation takes at most 1/5 of a training folder's examples
# ... and where one is: its examples' families leave training too (before, none did)
FOLDER_HOLDOUT = "the validation folder's query and positive families leave training"


def home_families(example: Example) -> frozenset[str]:
    """The families an example is held out by: its query's and its positive's (every family
    it names where the shard does not say which those are). Not its negatives': a Stage II
    example held out by a negative's family left the same query with its other X positive
    in training."""
    return example.own_families or example.families


def holdout_bucket(example: Example, n_buckets: int, seed: int) -> bool:
    """True when ``example`` falls into validation bucket 0 (by the first of its
    :func:`home_families`)."""
    family = min(home_families(example))
    return zlib.crc32(f"{seed}:{family}".encode()) % n_buckets == 0


class BatchStream(IterableDataset):
    """Family-disjoint training batches streamed from shards; ``set_epoch`` reshuffles shard order.

    ``reader`` turns shards into examples (:func:`read_examples`; PHAGE's stream reads claim
    graphs) and :meth:`order` may reorder them before batching."""

    reader = staticmethod(read_examples)

    def __init__(
        self,
        folder: str,
        batch_size: int,
        seed: int,
        buffer_size: int = 4096,
        max_chars: int | None = None,
        exclude_families: frozenset[str] | None = None,
    ):
        self.folder = folder
        self.batch_size = batch_size
        self.seed = seed
        self.buffer_size = buffer_size
        self.max_chars = max_chars
        self.exclude_families = exclude_families  # the validation's home families
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _examples(self, families_only: bool = False) -> Iterator[Example]:
        stream = self.reader(self.folder, self.max_chars, self.seed + self.epoch, families_only)
        if self.exclude_families:
            held = self.exclude_families
            stream = (e for e in stream if held.isdisjoint(home_families(e)))
        return self.order(stream)

    def order(self, examples: Iterator) -> Iterator:
        """The examples in batching order (here: as read)."""
        return examples

    def __iter__(self) -> Iterator[list[Example]]:
        return family_disjoint_batches(self._examples(), self.batch_size, self.buffer_size)

    def count_batches(self) -> int:
        """Exact number of batches one pass yields (a cheap pass over family ids only); the
        examples it leaves out are in ``self.dropped``."""
        self.dropped: dict[str, int] = {}
        return sum(
            1
            for _ in family_disjoint_batches(
                self._examples(True), self.batch_size, self.buffer_size, counts=self.dropped
            )
        )


def negatives_per_example(batch: list[Example], what: str = "one batch") -> int:
    """The number of negatives every example of ``batch`` carries; an error if they differ
    (the flat negatives tensor is reshaped to examples x negatives)."""
    counts = {len(e.negatives) for e in batch}
    if len(counts) != 1:
        raise ValueError(
            f"examples of {what} carry different numbers of negatives: {sorted(counts)}"
        )
    return counts.pop()


class RankSlice(IterableDataset):
    """This process's share of each global batch: every rank reads the same deterministic
    stream of family-disjoint global batches and keeps rows ``[rank * b, (rank + 1) * b)``.

    Slicing examples before collation keeps each example's negatives with it (slicing the
    collated tensors, as accelerate's batch dispatch does, cuts the flat negatives tensor at
    the query count, not at query count x negatives)."""

    def __init__(self, stream: BatchStream, rank: int, world: int):
        if stream.batch_size % world:
            raise ValueError(f"global batch {stream.batch_size} does not split over {world} ranks")
        self.stream, self.rank, self.world = stream, rank, world

    def set_epoch(self, epoch: int) -> None:
        self.stream.set_epoch(epoch)

    def __iter__(self) -> Iterator[list[Example]]:
        share = self.stream.batch_size // self.world
        for batch in self.stream:
            if isinstance(batch[0], Example):  # ranks must gather equal shapes
                negatives_per_example(batch, "one global batch")
            yield batch[self.rank * share : (self.rank + 1) * share]


def validation_examples(
    train_folder: str,
    validation_folder: str | None,
    size: int,
    seed: int,
    max_chars: int | None,
    reader=read_examples,
) -> tuple[list[Example], frozenset[str] | None]:
    """(validation examples, the families to exclude from training or None).

    With a validation folder, its first ``size`` examples, whose query and positive families
    leave training (a no-op for build_triplets' validation, disjoint by construction).
    Otherwise (at most a fifth of the training examples) whole families of the
    training data are held out: validation takes one example of each family set whose hash
    falls in bucket 0 of n, up to ``size``, and every example whose query or positive family
    (:func:`home_families`) is a validation example's query or positive family leaves
    training. Only those: the bucket's other families (it is sized to ~1.5x ``size`` so that
    it fills) stay in training; excluding the whole bucket, as before, cost a small corpus up
    to half its examples.
    """
    if size <= 0:
        return [], None
    if validation_folder:
        # its families leave training as a held-out family does: a validation export that
        # shares examples with the training one (the same folder, or another export of the
        # same pairs) scored the checkpoint choice on trained examples
        validation = list(islice(reader(validation_folder, max_chars), size))
        return validation, frozenset().union(*map(home_families, validation))
    rows = read_manifest(train_folder)["rows"]
    # at most a fifth of the examples: on a small pair set (a recipe of a few hundred pairs)
    # --validation_size 128 and the families it takes along left no batch to train on
    size = max(1, min(size, rows // MAX_HOLDOUT_SHARE))
    # Bucket 0 should hold ~1.5x `size` families; rows per family estimated on a prefix.
    prefix = [e.families for e in islice(reader(train_folder, families_only=True), 200_000)]
    rows_per_family = len(prefix) / max(1, len(set(prefix)))
    n_buckets = max(2, int(rows / (1.5 * size * rows_per_family)))
    seen: set[frozenset[str]] = set()

    def one_per_family(stream: Iterator[Example]) -> Iterator[Example]:
        # Every example of a held-out family leaves training; one of each is enough to
        # validate on and keeps validation batches full and family-disjoint.
        for example in stream:
            if example.families not in seen:
                seen.add(example.families)
                yield example

    held = one_per_family(
        e for e in reader(train_folder, max_chars) if holdout_bucket(e, n_buckets, seed)
    )
    validation = list(islice(held, size))
    return validation, frozenset().union(*map(home_families, validation))
