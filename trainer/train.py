"""Train an xembed encoder: Stage I (pairs), Stage II (triplets, from Stage I), the SFT control,
or PHAGE (claim-graph-guided, from the base model; BERT-style encoders only).

    python -m trainer.train configs/cpu-small.yaml --stage stage1 --train_data shards/stage1 --output_dir models/s1
    python -m trainer.train configs/paper.yaml --model_name_or_path /models/Qwen3-Embedding-0.6B \\
        --stage stage2 --init_model models/s1 --train_data shards/stage2 --output_dir models/x
    torchrun --nproc-per-node 8 -m trainer.train configs/paper.yaml ...
    python -m trainer.train configs/cpu-e5.yaml --stage phage --train_data shards/phage \
        --output_dir models/phage [--graph_attention false]

The best checkpoint (lowest validation loss) is exported to output_dir as a merged model
(+ ``adapter/`` when LoRA is used) that SentenceTransformer and AutoModel both load.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import torch
from transformers import set_seed
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from lake.cli import finish, run_job
from schemas import defaults
from trainer.arguments import parse
from trainer.data import (
    BATCHING,
    FOLDER_HOLDOUT,
    HOLDOUT,
    BatchStream,
    read_manifest,
    validation_examples,
)
from trainer.encoder import Encoder, EncoderConfig
from trainer.loss import InfoNCELoss, MatryoshkaLoss
from trainer.models import resolve
from trainer.phage import PhageEncoder, PhageLoss
from trainer.phage_data import DATASET as PHAGE_DATASET
from trainer.phage_data import PhageStream
from trainer.registry import registry_row, write_registry
from trainer.trainer import DivergenceGuard, PhageTrainer, XembedTrainer, check_converged


def build_encoder(model_args, training_args) -> tuple[Encoder, str]:
    base = (
        training_args.init_model
        if training_args.stage == "stage2"
        else model_args.model_name_or_path
    )
    path = resolve(base)
    config = EncoderConfig(
        pooling=model_args.pooling,
        prompt_style=model_args.prompt_style,
        max_length=model_args.max_length,
        query_instruction=model_args.query_instruction,
    )
    dtype = torch.bfloat16 if training_args.bf16 else None
    encoder = Encoder.from_pretrained(path, config, torch_dtype=dtype)
    if model_args.lora:
        encoder.add_lora(
            model_args.lora_r,
            model_args.lora_alpha,
            model_args.lora_dropout,
            model_args.lora_target_modules,
        )
    return encoder, path


# --stage -> the `export_training --dataset` it trains on, and those its --validation_data
# may be: Stage II (and the single-stage SFT baseline) needs the triplets' hard negatives
STAGE_DATASETS = {
    "stage1": ("stage1", ("stage1",)),
    "stage2": ("stage2", ("stage2_validation", "stage2")),
    "sft": ("stage2", ("stage2_validation", "stage2")),
    "phage": (PHAGE_DATASET, (PHAGE_DATASET,)),
}


def check_datasets(stage: str, train_data: str, manifest: dict, validation_data: str | None):
    """Refuse shards of another stage: Stage I pairs given to --stage stage2 trained without a
    single hard negative, and Stage II triplets given to --stage stage1 trained on them."""
    wanted, validation = STAGE_DATASETS[stage]
    if manifest.get("dataset") != wanted:
        raise ValueError(
            f"{train_data} holds {manifest.get('dataset')!r} data; --stage {stage} trains on "
            f"`export_training --dataset {wanted}` shards"
            + (
                " and only --stage phage does"
                if PHAGE_DATASET in (wanted, manifest.get("dataset"))
                else ""
            )
        )
    if validation_data:
        held = read_manifest(validation_data).get("dataset")
        if held not in validation:
            raise ValueError(
                f"--validation_data {validation_data} holds {held!r} data; --stage {stage} "
                f"validates on `export_training --dataset {validation[0]}` shards"
            )


def main(argv: list[str] | None = None) -> int:
    model_args, data_args, args = parse(argv)
    args.remove_unused_columns = False
    set_seed(args.seed)
    manifest = read_manifest(data_args.train_data)
    shards_recipe = manifest.get("recipe", defaults.DEFAULT_RECIPE)
    if data_args.recipe is None:
        data_args.recipe = shards_recipe
    elif args.stage == "stage1" and data_args.recipe != shards_recipe:
        raise ValueError(
            f"--recipe {data_args.recipe} but {data_args.train_data} holds the pairs of "
            f"{shards_recipe!r} (its _manifest.json); export that recipe or drop --recipe"
        )
    phage = args.stage == "phage"
    check_datasets(args.stage, data_args.train_data, manifest, data_args.validation_data)
    resume = (
        last_complete_checkpoint(args.output_dir, write=args.process_index == 0)
        if args.resume != "false" and Path(args.output_dir).exists()
        else None
    )
    # before the model loads: a resume into another run's checkpoints fails fast
    identity = _run_identity(model_args, data_args, args, manifest)
    if args.resume == "auto" and resume is not None:
        resume = own_checkpoint(args.output_dir, resume, identity)
    check_resumable(args.output_dir, resume, identity, write=args.process_index == 0)
    encoder, base_path = build_encoder(model_args, args)
    wider = [d for d in args.dims() if d is not None and d > encoder.dim]
    if wider:  # the loss would train the full vector under the wider label
        raise ValueError(
            f"--matryoshka_dims {args.matryoshka_dims}: {', '.join(map(str, wider))} is wider "
            f"than the {encoder.dim} dimensions of {base_path}; use dims up to {encoder.dim} "
            "or 'full'"
        )
    model = PhageEncoder(encoder, graph=args.graph_attention) if phage else encoder
    stream_class = PhageStream if phage else BatchStream  # its reader reads the validation too

    validation, exclude = validation_examples(
        data_args.train_data,
        data_args.validation_data,
        data_args.validation_size,
        args.seed,
        data_args.max_chars,
        stream_class.reader,
    )
    world = max(1, args.world_size)
    stream = stream_class(
        data_args.train_data,
        args.per_device_train_batch_size * world,
        args.seed,
        data_args.buffer_size,
        data_args.max_chars,
        exclude,
    )
    n_batches = stream.count_batches()
    if stream.dropped["dropped_family_overflow"]:
        print(
            f"[train] note: {stream.dropped['dropped_family_overflow']:,} examples left out of "
            "this epoch: their families are too frequent for family-disjoint batches of "
            f"{stream.batch_size} (the --buffer_size {data_args.buffer_size} of waiting "
            "examples overflowed; a larger buffer, or a --family-cap at build_pairs, keeps them)",
            file=sys.stderr,
        )
    steps = n_batches // args.gradient_accumulation_steps
    if args.max_steps <= 0 or args.max_steps > steps:
        args.max_steps = steps  # at most one epoch
    if args.max_steps < 1:
        raise ValueError(
            f"{data_args.train_data}: {n_batches} batches of "
            f"{args.per_device_train_batch_size * world} is less than one optimizer step"
            + (
                f" (after {len(validation)} validation examples and every training example "
                "of their query and positive families were held out; a smaller "
                "--validation_size or --per_device_train_batch_size leaves more)"
                if exclude
                else ""
            )
        )
    print(
        f"[train] stage={args.stage} recipe={data_args.recipe} base={base_path} "
        f"query_instruction={model_args.query_instruction} train_batches={n_batches} "
        f"(left over at the epoch's end: {stream.dropped['dropped_at_end']:,} examples) "
        f"steps={args.max_steps} validation={len(validation)}",
        file=sys.stderr,
        flush=True,
    )

    if phage:
        loss = PhageLoss(
            args.taxonomy_weight,
            args.topology_weight,
            args.temperature,
            args.dims(),
            args.weights(),
        )
    else:
        margin = args.fn_margin if args.fn_margin >= 0 else None
        loss = MatryoshkaLoss(InfoNCELoss(args.temperature, margin), args.dims(), args.weights())
    guard = DivergenceGuard()
    trainer = (PhageTrainer if phage else XembedTrainer)(
        model=model,
        args=args,
        loss_fn=loss,
        train_stream=stream,
        validation=validation,
        callbacks=[guard],
    )
    result = trainer.train(resume_from_checkpoint=resume)
    best = trainer.state.best_metric
    if validation and (best is None or not args.load_best_model_at_end):
        # the exported weights are the last step's: record their loss, not the best step's
        best = final_validation_loss(trainer)
    check_converged(model, guard, trainer.state, args, best if validation else None)

    if trainer.is_world_process_zero():  # one writer: ranks hold the same weights
        model.save(args.output_dir)  # PHAGE: the plain encoder, no graph parts
    model_id = args.model_id or _model_id(args, manifest)
    config = {
        "model": asdict(model_args),
        "data": asdict(data_args),
        "training": {k: v for k, v in args.to_dict().items() if not k.startswith("_")},
    }
    row = registry_row(
        model_id=model_id,
        stage=args.stage,
        base_model=model_args.model_name_or_path,
        # absolute: evaluation follows the chain from wherever it runs (held-out check); a
        # trained folder given as --model_name_or_path is a parent too (its weights are)
        parent_model=_absolute(args.init_model)
        if args.init_model
        else (_absolute(base_path) if (Path(base_path) / "registry.json").is_file() else None),
        config_json=config,
        data_manifest_hash=manifest.get("content_hash"),
        data_versions=manifest.get("delta_versions"),
        best_val_loss=None if best is None else float(best),
        steps=int(result.global_step),
        output_path=str(Path(args.output_dir).resolve()),
    )
    if trainer.is_world_process_zero():
        # the lake and runs the shards came from: the held-out check reads registry.json
        extra = {
            "train_metrics": result.metrics,
            "data_lake": manifest.get("lake"),
            "data_runs": manifest.get("delta_runs"),
        }
        write_registry(row, args.output_dir, args.lake, extra=extra)
        print(
            f"[train] saved {model_id} to {args.output_dir} (best validation loss {best})",
            file=sys.stderr,
            flush=True,
        )
    return 0


RUN_IDENTITY = "xembed_run.json"


def data_identity(manifest: dict) -> str | None:
    """The rows of an export and the order the trainer reads them in. ``content_hash`` sums a
    hash per row, so an export of the same rows with another ``--seed`` or
    ``--rows-per-shard`` (another order) has the same one; the seed and the shards (name,
    rows, bytes) fix the order."""
    if manifest.get("content_hash") is None:
        return None
    order = [
        manifest.get("seed"),
        [[s["file"], s["rows"], s.get("bytes")] for s in manifest.get("shards", [])],
    ]
    digest = hashlib.sha1(json.dumps(order).encode()).hexdigest()[:12]
    return f"{manifest['content_hash']}:{digest}"


def _run_identity(model_args, data_args, args, manifest: dict) -> dict:
    """What fixes the batches a resumed run skips, the validation its best loss was measured
    on, the parameters it trains and the loss it minimises: a resume with any of it changed
    would mix two runs under one registry row (or fail loading the optimizer's state)."""
    validation = data_args.validation_data
    trained = {  # which parameters train, and their shapes
        "lora": [model_args.lora_r, model_args.lora_alpha, model_args.lora_target_modules]
        if model_args.lora
        else None,
        # PHAGE: its graph control has no relation bias; the two extra losses' weights
        **(
            {
                "graph_attention": args.graph_attention,
                "taxonomy_weight": args.taxonomy_weight,
                "topology_weight": args.topology_weight,
            }
            if args.stage == "phage"
            else {}
        ),
    }
    loss = {
        "temperature": args.temperature,
        "fn_margin": args.fn_margin,
        "matryoshka": [args.dims(), args.weights()],
    }
    return {
        "stage": args.stage,
        "recipe": data_args.recipe,
        "model": _absolute(args.init_model or model_args.model_name_or_path),
        "train_data": data_identity(manifest),
        "validation_data": data_identity(read_manifest(validation)) if validation else None,
        "validation_size": data_args.validation_size,
        "seed": args.seed,
        "global_batch_size": args.per_device_train_batch_size * max(1, args.world_size),
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "buffer_size": data_args.buffer_size,
        "max_chars": data_args.max_chars,
        "batching": BATCHING,
        "holdout": None
        if data_args.validation_size <= 0
        else (FOLDER_HOLDOUT if validation else HOLDOUT),
        **trained,
        **loss,
    }


def final_validation_loss(trainer) -> float:
    """The validation loss of the weights in memory at the end: the last logged evaluation
    when it was at the last step, else a new one."""
    evals = [e for e in trainer.state.log_history if "eval_loss" in e]
    if evals and evals[-1].get("step") == trainer.state.global_step:
        return evals[-1]["eval_loss"]
    return trainer.evaluate()["eval_loss"]


def _absolute(path: str) -> str:
    """A local path as an absolute one (``builtin:...`` and other names as given)."""
    return str(Path(path).resolve()) if Path(path).exists() else path


def last_complete_checkpoint(output_dir: str, write: bool = True) -> str | None:
    """The latest checkpoint whose save finished (the Trainer writes trainer_state.json last).

    A run killed while saving leaves a later checkpoint folder without it, which
    ``--resume`` used to pick and fail on; such folders are removed (``write``: one process
    does) so the run goes on from the checkpoint before and saves that step again."""
    steps = {
        int(p.name.rsplit("-", 1)[1]): p
        for p in Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*")
        if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()
    }
    folders = [steps[step] for step in sorted(steps, reverse=True)]
    for folder in folders:
        if (folder / TRAINER_STATE_NAME).is_file():
            return str(folder)
        if write:
            shutil.rmtree(folder)
        print(
            f"[train] --resume: {folder} has no {TRAINER_STATE_NAME} (its save was "
            "interrupted); going on from the checkpoint before it",
            file=sys.stderr,
        )
    return None


def clear_earlier_run(output_dir: Path) -> None:
    """A fresh run replaces what an earlier run left in its output folder: the checkpoints
    (they stayed, so a later ``--resume`` went on from the earlier run's last one, under this
    run's identity) and a LoRA ``adapter/`` the new model would not match. The model files
    themselves are overwritten by the export."""
    stale = sorted(p for p in output_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*") if p.is_dir())
    if (output_dir / "adapter").is_dir():
        stale.append(output_dir / "adapter")
    for folder in stale:
        shutil.rmtree(folder)
    if stale:
        print(
            f"[train] fresh run: removed {', '.join(p.name for p in stale)} of an earlier run "
            f"from {output_dir} (--resume true goes on from them instead)",
            file=sys.stderr,
        )


def check_resumable(
    output_dir: str, checkpoint: str | None, identity: dict, write: bool = True
) -> None:
    """On a fresh run record ``identity`` in ``output_dir`` (``write``: one process does);
    on ``--resume`` refuse to go on from a checkpoint that another identity (other data,
    seed or batch size) trained."""
    path = Path(output_dir) / RUN_IDENTITY
    if checkpoint is None:
        if not write:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        clear_earlier_run(path.parent)
        path.write_text(json.dumps(identity, indent=2, sort_keys=True))
        return
    changed = identity_changes(output_dir, identity)
    if changed is None:
        print(
            f"[train] note: {path} is missing: cannot check that {checkpoint} was trained on "
            "the same data and settings",
            file=sys.stderr,
        )
    elif changed:
        raise ValueError(
            f"--resume: {checkpoint} belongs to another run ({changed}); resume with the same "
            "data and settings, or train into a new --output_dir"
        )


def identity_changes(output_dir: str, identity: dict) -> str | None:
    """How ``identity`` differs from the one recorded in ``output_dir`` ('' when it does not;
    None when none is recorded)."""
    path = Path(output_dir) / RUN_IDENTITY
    if not path.exists():
        return None
    recorded = json.loads(path.read_text())
    changed = {k: (recorded.get(k), v) for k, v in identity.items() if recorded.get(k) != v}
    return "; ".join(f"{k} was {old!r}, now {new!r}" for k, (old, new) in changed.items())


def own_checkpoint(output_dir: str, checkpoint: str, identity: dict) -> str | None:
    """``--resume auto``: ``checkpoint`` when this run (the same identity) trained it, else
    None (train afresh; the fresh run clears the folder). A retried task goes on from where
    its killed try stopped, and a new run with other data or settings starts over."""
    changed = identity_changes(output_dir, identity)
    if changed == "":
        print(f"[train] --resume auto: going on from {checkpoint}", file=sys.stderr)
        return checkpoint
    why = "no run identity recorded" if changed is None else f"another run's: {changed}"
    print(
        f"[train] --resume auto: {checkpoint} is not this run's ({why}); training afresh",
        file=sys.stderr,
    )
    return None


def _model_id(args, manifest: dict) -> str:
    digest = hashlib.sha1(json.dumps([args.stage, args.seed, data_identity(manifest)]).encode())
    return f"{args.stage}-{datetime.now(UTC):%Y%m%dT%H%M%S}-{digest.hexdigest()[:6]}"


if __name__ == "__main__":
    finish(run_job("train", main))
