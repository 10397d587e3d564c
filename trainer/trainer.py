"""XembedTrainer: the HF Trainer with a contrastive loss and family-disjoint streaming batches.

Overrides only what it must: the loss (encode query / positive / negatives, then InfoNCE with
Matryoshka), the data loaders (pre-batched streams), and the evaluation step (loss only).
"""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader
from transformers import Trainer

from trainer.data import BatchStream, Example, family_disjoint_batches
from trainer.encoder import Encoder, format_passage, format_query


class Collator:
    """Tokenize a batch of examples: query, positive, flattened negatives, each with its prompt."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder

    def __call__(self, batch: list[Example]) -> dict:
        config = self.encoder.encoder_config
        out = {
            "query": self.encoder.tokenize(
                [format_query(e.query, e.query_lang, config) for e in batch]
            ),
            "positive": self.encoder.tokenize([format_passage(e.positive, config) for e in batch]),
        }
        k = {len(e.negatives) for e in batch}
        if len(k) != 1:
            raise ValueError(
                f"examples in one batch carry different numbers of negatives: {sorted(k)}"
            )
        if k != {0}:
            out["negatives"] = self.encoder.tokenize(
                [format_passage(t, config) for e in batch for t in e.negatives]
            )
        return out


class _ListStream(torch.utils.data.IterableDataset):
    def __init__(self, batches: list[list[Example]]):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


class XembedTrainer(Trainer):
    def __init__(
        self, *args, loss_fn, train_stream: BatchStream, validation: list[Example], **kwargs
    ):
        super().__init__(*args, eval_dataset=validation or None, **kwargs)
        self.loss_fn = loss_fn
        self.train_stream = train_stream
        self.validation = validation
        self.collator = Collator(self.model)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        queries = model(**inputs["query"])
        positives = model(**inputs["positive"])
        negatives = None
        if "negatives" in inputs:
            flat = model(**inputs["negatives"])
            negatives = flat.view(queries.shape[0], -1, flat.shape[-1])
        loss = self.loss_fn(queries, positives, negatives)
        return (loss, {"loss": loss}) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss = self.compute_loss(model, inputs)
        return loss.detach(), None, None

    def get_train_dataloader(self) -> DataLoader:
        loader = DataLoader(self.train_stream, batch_size=None, collate_fn=self.collator)
        return self.accelerator.prepare(loader)

    def get_eval_dataloader(self, eval_dataset=None) -> DataLoader:
        batches = list(
            family_disjoint_batches(
                self.validation,
                self.args.per_device_eval_batch_size,
                buffer_size=len(self.validation) + 1,
                drop_last=False,
            )
        )
        loader = DataLoader(_ListStream(batches), batch_size=None, collate_fn=self.collator)
        return self.accelerator.prepare(loader)
