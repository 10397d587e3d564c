"""XembedTrainer: the HF Trainer with a contrastive loss and family-disjoint streaming batches.

Overrides only what it must: the loss (encode query / positive / negatives, then InfoNCE with
Matryoshka), the data loaders (pre-batched streams), and the evaluation step (loss only).
PhageTrainer: the same for claim graphs (one sequence per patent under graph attention, the
taxonomy + topology loss computed on each process's share of the batch, no gathering).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.data import DataLoader
from transformers import Trainer, TrainerCallback

from trainer.data import (
    BatchStream,
    Example,
    RankSlice,
    negatives_per_example,
    validation_batches,
)
from trainer.encoder import Encoder, format_passage, format_query
from trainer.phage import PhageEncoder, PhageLoss
from trainer.phage_data import subclass_pairs


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
        if negatives_per_example(batch):
            out["negatives"] = self.encoder.tokenize(
                [format_passage(t, config) for e in batch for t in e.negatives]
            )
        return out


@contextmanager
def _local_loss(loss_fn):
    """Validation batches are whole on every rank: no cross-rank gathering while scoring."""
    inner = getattr(loss_fn, "loss", loss_fn)
    gather = inner.gather
    inner.gather = False
    try:
        yield
    finally:
        inner.gather = gather


def nonfinite_parameters(model: nn.Module) -> list[str]:
    """Names of the parameters holding NaN or inf (one device-to-host copy for all of them)."""
    named = list(model.named_parameters())
    if not named:
        return []
    flags = [torch.isfinite(p.detach()).all() for _, p in named]
    finite = torch.stack([f.to(flags[0].device) for f in flags]).cpu().tolist()
    return [name for (name, _), ok in zip(named, finite, strict=True) if not ok]


class TrainingDiverged(RuntimeError):
    """The weights became NaN/inf, or no validation loss was finite: nothing is exported."""


class DivergenceGuard(TrainerCallback):
    """Stops training at the first log whose weights hold NaN or inf.

    Once a step has put NaN into the weights every later step keeps it there, yet the run
    would go on to its last step and export them: the Trainer's logged training loss filters
    NaN out (``logging_nan_inf_filter``) and its best-checkpoint choice starts from an
    infinite loss that a NaN validation loss never beats. Checked at each log (training and
    validation), not each step, to cost nothing measurable; every rank holds the same
    weights, so every rank stops at the same step.
    """

    def __init__(self):
        self.step: int | None = None
        self.parameters: list[str] = []

    def on_log(self, args, state, control, model=None, **kwargs):
        if self.step is None and model is not None:
            bad = nonfinite_parameters(model)
            if bad:
                self.step, self.parameters = state.global_step, bad
                control.should_training_stop = True


def check_converged(
    model: nn.Module, guard: DivergenceGuard, state, args, best: float | None
) -> None:
    """Raise :class:`TrainingDiverged` naming the step, the weights and what to change when
    training diverged (the best checkpoint the Trainer loaded back does not hide it) or when
    the best validation loss ``best`` (None: no validation) is not finite."""
    bad = guard.parameters or nonfinite_parameters(model)
    if not bad and (best is None or math.isfinite(best)):
        return
    step = guard.step if guard.step is not None else state.global_step
    what = (
        f"{len(bad)} weight tensors hold NaN or inf at step {step} (e.g. {bad[0]})"
        if bad
        else f"no validation loss was finite (up to step {step})"
    )
    kept = (
        f"; the best checkpoint before that is {state.best_model_checkpoint} "
        f"(validation loss {best:.4g})"
        if state.best_model_checkpoint and best is not None and math.isfinite(best)
        else ""
    )
    raise TrainingDiverged(
        f"training diverged: {what}; nothing was exported or registered{kept}. Lower "
        f"--learning_rate (was {args.learning_rate:g}), keep --max_grad_norm above 0 (was "
        f"{args.max_grad_norm:g}), or train in bf16 rather than fp16"
    )


class _ListStream(torch.utils.data.IterableDataset):
    def __init__(self, batches: list[list[Example]]):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


class _EpochLoader(DataLoader):
    """A DataLoader the Trainer can tell the epoch (it reshuffles the shard order)."""

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)


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
        with torch.no_grad(), _local_loss(self.loss_fn):
            loss = self.compute_loss(model, inputs)
        return loss.detach(), None, None

    def get_train_dataloader(self) -> DataLoader:
        # Not accelerate's dispatch: each rank slices the global batch by example (RankSlice);
        # the Trainer moves the tensors to the device itself.
        state = self.accelerator.state
        shard = RankSlice(self.train_stream, state.process_index, state.num_processes)
        return _EpochLoader(shard, batch_size=None, collate_fn=self.collator)

    def get_eval_dataloader(self, eval_dataset=None) -> DataLoader:
        # Every rank scores every validation batch (they are few and may not split evenly);
        # the loss is then computed without cross-rank gathering, see prediction_step.
        batches = validation_batches(
            self.validation, self.args.per_device_eval_batch_size, self.eval_order
        )
        return DataLoader(_ListStream(batches), batch_size=None, collate_fn=self.collator)

    eval_order = None  # the validation examples' order before batching: as read


class PhageCollator:
    """Tokenize a batch of claim graphs: ids, mask, each token's claim, edges, subclasses."""

    def __init__(self, model: PhageEncoder):
        self.model = model

    def __call__(self, batch: list) -> dict:
        out = self.model.batch([e.graph for e in batch])
        out["edges"] = [list(e.graph.edges) for e in batch]
        out["subclasses"] = [list(e.subclasses) for e in batch]
        return out


class PhageTrainer(XembedTrainer):
    """Trains a :class:`~trainer.phage.PhageEncoder` on :class:`~trainer.phage_data.PhageStream`
    batches; logs the taxonomy and topology parts of the loss beside it."""

    def __init__(self, *args, loss_fn: PhageLoss, **kwargs):
        super().__init__(*args, loss_fn=loss_fn, **kwargs)
        self.collator = PhageCollator(self.model)
        self._parts: dict[str, list[float]] = defaultdict(list)

    @staticmethod
    def eval_order(examples: Iterator) -> Iterator:
        """Taxonomy mates side by side, as :class:`PhageStream` orders training: batched as
        read, few validation patents had a same-subclass batch-mate, and the checkpoint kept
        (lowest validation loss) was chosen nearly on the topology term alone."""
        examples = list(examples)
        return subclass_pairs(examples, buffer_size=len(examples) + 1)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        owners = inputs["claim_of_token"]
        embeddings, hidden = model(
            inputs["input_ids"], inputs["attention_mask"], owners, inputs["edges"]
        )
        loss, parts = self.loss_fn(
            embeddings, hidden, owners, inputs["subclasses"], inputs["edges"]
        )
        if model.training:
            for name, value in parts.items():
                self._parts[name].append(value)
        return (loss, {"loss": loss}) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss = self.compute_loss(model, inputs)
        return loss.detach(), None, None

    def log(self, logs: dict, *args, **kwargs) -> None:
        if "loss" in logs and self._parts:
            for name, values in self._parts.items():
                logs[f"{name}_loss"] = round(sum(values) / len(values), 4)
            self._parts.clear()
        super().log(logs, *args, **kwargs)
