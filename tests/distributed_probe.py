"""torchrun entry point of tests/test_distributed.py: ``trainer.train`` with a recorder around
the training loss. Per optimizer step and rank it appends to ``$PROBE_OUT.rank<r>`` hashes of
the query, positive and negative token rows this rank trained on, the number of candidate
rows the loss saw after the cross-rank gather, and the rank's loss."""

from __future__ import annotations

import hashlib
import json
import os
import sys

from trainer import loss as loss_module
from trainer import train
from trainer.trainer import XembedTrainer

_gathered: list[int] = []
_original_gather = loss_module._gather


def _recording_gather(t):
    gathered, offset = _original_gather(t)
    _gathered.append(int(gathered.shape[0]))
    return gathered, offset


def _rows(batch) -> list[str]:
    """One hash per token row, padding removed (ranks pad their halves to other lengths)."""
    return [
        hashlib.sha1(str(ids[mask.bool()].tolist()).encode()).hexdigest()[:16]
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ]


_compute_loss = XembedTrainer.compute_loss


def _recording_compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
    _gathered.clear()
    result = _compute_loss(self, model, inputs, return_outputs, num_items_in_batch)
    if model.training:
        loss = result[0] if return_outputs else result
        rank = self.accelerator.process_index
        record = {
            "step": self.state.global_step,
            "queries": _rows(inputs["query"]),
            "positives": _rows(inputs["positive"]),
            "negatives": _rows(inputs["negatives"]),
            "gathered_rows": list(_gathered),
            "loss": float(loss.detach()),
        }
        with open(f"{os.environ['PROBE_OUT']}.rank{rank}", "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
    return result


loss_module._gather = _recording_gather
XembedTrainer.compute_loss = _recording_compute_loss

if __name__ == "__main__":
    sys.exit(train.main(sys.argv[1:]))
