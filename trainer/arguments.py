"""Trainer arguments as dataclasses (HfArgumentParser); one YAML/JSON config file works too.

    python -m trainer.train configs/cpu-small.yaml --train_data shards/stage1 --output_dir out
    python -m trainer.train --model_name_or_path PATH --train_data DIR --output_dir DIR ...

Values on the command line override those of the config file. A config section named
``supervised`` overrides the file's values for --stage stage2 and sft (the paper trains
Stage II and the SFT control with other settings than Stage I); for --stage stage1, the
section ``recipes: {<recipe>: {...}}`` of the shards' recipe (``--recipe``, else the
manifest's; a matched control ``r4-matched-r3`` takes ``r4``'s) overrides them, e.g.
``qaecter`` trains without query instructions. The section ``phage`` overrides them for
--stage phage (claim-graph-guided training of a BERT-style encoder, trainer/phage.py).
"""

# No `from __future__ import annotations`: HfArgumentParser reads the real type objects.
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from transformers import HfArgumentParser, TrainingArguments

from schemas import defaults

STAGES = ("stage1", "stage2", "sft", "phage")
RESUME_MODES = ("false", "true", "auto")
# the spellings a boolean flag took (the flag was one): yes/no, 1/0, t/f, a YAML boolean
RESUME_SPELLINGS = {
    **dict.fromkeys(("true", "yes", "y", "t", "1"), "true"),
    **dict.fromkeys(("false", "no", "n", "f", "0"), "false"),
}


def check_range(owner, low: dict[str, float], above: dict[str, float] | None = None) -> None:
    """Each field of ``low`` at least its bound and of ``above`` above it (None passes): a
    ValueError naming the flag, when parsed, rather than a negative slice, a silent no-op or a
    failure after the model has loaded."""
    for name, bound in low.items():
        value = getattr(owner, name)
        if value is not None and value < bound:
            raise ValueError(f"--{name} must be >= {bound:g}, got {value!r}")
    for name, bound in (above or {}).items():
        value = getattr(owner, name)
        if value is not None and not value > bound:
            raise ValueError(f"--{name} must be > {bound:g}, got {value!r}")


@dataclass
class ModelArguments:
    model_name_or_path: str = field(
        metadata={
            "help": "base model: a local path (e.g. Qwen3-Embedding-0.6B) or builtin:me5-small / "
            "builtin:minilm / builtin:qwen3-tiny"
        }
    )
    pooling: str = field(
        default="auto",
        metadata={
            "help": "last | mean | cls | auto (the base model's: its saved settings or its "
            "SentenceTransformer pooling, else last for decoder models, mean for the others)"
        },
    )
    prompt_style: str = field(
        default="auto",
        metadata={
            "help": "instruct (Qwen3-Embedding) | e5 (query:/passage:) | none | auto (the base "
            "model's conventions)"
        },
    )
    max_length: int = field(
        default=4096, metadata={"help": "max tokens per text; longer texts are cut on the right"}
    )
    query_instruction: bool = field(
        default=True,
        metadata={
            "help": "prefix queries with the language-specific retrieval instruction (documents get none)"
        },
    )
    lora: bool = field(
        default=True, metadata={"help": "train a LoRA adapter (False: train all weights)"}
    )
    lora_r: int = field(default=64, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha"})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout"})
    lora_target_modules: str = field(default="all-linear", metadata={"help": "peft target_modules"})

    def __post_init__(self):
        check_range(self, {"max_length": 1, "lora_r": 1, "lora_alpha": 1, "lora_dropout": 0})
        if self.lora_dropout >= 1:
            raise ValueError(f"--lora_dropout must be < 1, got {self.lora_dropout!r}")


@dataclass
class DataArguments:
    train_data: str = field(
        metadata={"help": "folder of training shards with _manifest.json (export_training)"}
    )
    validation_data: str | None = field(
        default=None,
        metadata={
            "help": "folder of validation shards; default: hold out whole families of train_data"
        },
    )
    validation_size: int = field(
        default=defaults.VALIDATION_SIZE, metadata={"help": "validation examples to hold out"}
    )
    max_chars: int | None = field(
        default=None, metadata={"help": "cut texts at N characters before tokenizing"}
    )
    recipe: str | None = field(
        default=None,
        metadata={
            "help": "stage1: the pair set of --train_data (default: its manifest's); selects the "
            "config section recipes.<recipe>"
        },
    )
    buffer_size: int = field(
        default=4096,
        metadata={"help": "examples buffered to fill batches without two texts of one family"},
    )

    def __post_init__(self):
        check_range(self, {"validation_size": 0, "max_chars": 1, "buffer_size": 1})


@dataclass
class XembedTrainingArguments(TrainingArguments):
    stage: str = field(
        default="stage1",
        metadata={
            "help": "stage1: pairs from the base model; stage2: triplets from --init_model (Stage I "
            "output) with a fresh LoRA; sft: Stage II settings from the base model; phage: "
            "claim-graph-guided training (export_training --dataset phage) from the base model"
        },
    )
    init_model: str | None = field(default=None, metadata={"help": "Stage I output (stage2 only)"})
    temperature: float = field(default=0.1, metadata={"help": "InfoNCE temperature"})
    fn_margin: float = field(
        default=0.2,
        metadata={"help": "false-negative mask margin; a negative value disables masking"},
    )
    matryoshka_dims: str = field(
        default="64,full", metadata={"help": "comma-separated dims, 'full' = model dim"}
    )
    matryoshka_weights: str = field(
        default="0.6,0.4", metadata={"help": "loss weight per Matryoshka dim"}
    )
    taxonomy_weight: float = field(
        default=1.0, metadata={"help": "phage: weight of the inter-patent IPC-subclass contrast"}
    )
    topology_weight: float = field(
        default=0.5, metadata={"help": "phage: weight of the intra-patent claim-graph contrast"}
    )
    graph_attention: bool = field(
        default=True,
        metadata={
            "help": "phage: the claim graph's connectivity mask and learnable relation biases in "
            "attention (False: the same objective under plain attention, the no-graph control)"
        },
    )
    lake: str | None = field(
        default=None, metadata={"help": "lake root for the models/registry Delta table"}
    )
    model_id: str | None = field(default=None, metadata={"help": "registry id (default: derived)"})
    resume: str = field(
        default="false",
        metadata={
            "help": "true: go on from the last checkpoint in output_dir (refused when another "
            "run trained it); auto: go on when it is this run's, else train afresh (what a "
            "retried DAG task does); false: train afresh"
        },
    )

    def __post_init__(self):
        super().__post_init__()
        check_range(
            self,
            {
                "per_device_train_batch_size": 1,
                "per_device_eval_batch_size": 1,
                "gradient_accumulation_steps": 1,
                "learning_rate": 0,
            },
            {"temperature": 0},
        )
        if self.model_id is not None:
            defaults.check_label(self.model_id, "--model_id")
        if self.dataloader_num_workers:  # our loaders are built without workers
            raise ValueError(
                f"--dataloader_num_workers {self.dataloader_num_workers} would be ignored: the "
                "family-disjoint batches are built and tokenized in the training process; set 0"
            )
        self.resume = RESUME_SPELLINGS.get(str(self.resume).strip().lower(), self.resume)
        if self.resume not in RESUME_MODES:
            raise ValueError(f"--resume must be one of {RESUME_MODES}, got {self.resume!r}")
        if self.stage not in STAGES:
            raise ValueError(f"--stage must be one of {STAGES}, got {self.stage!r}")
        if self.stage == "stage2" and not self.init_model:
            raise ValueError("--stage stage2 needs --init_model <Stage I output folder>")
        if self.stage != "stage2" and self.init_model:
            raise ValueError(
                f"--init_model only applies to --stage stage2 (got --stage {self.stage})"
            )

        try:
            dims, weights = self.dims(), self.weights()
        except ValueError as error:
            raise ValueError(f"--matryoshka_dims / --matryoshka_weights: {error}") from None
        if len(dims) != len(weights) or any(w < 0 for w in weights):
            raise ValueError(
                f"--matryoshka_weights {self.matryoshka_weights!r}: one weight >= 0 per "
                f"--matryoshka_dims value ({self.matryoshka_dims!r})"
            )

    def dims(self) -> list[int | None]:
        return defaults.parse_dims(self.matryoshka_dims)

    def weights(self) -> list[float]:
        return [float(w) for w in self.matryoshka_weights.split(",")]


# Config section applied to --stage stage2 and sft (the paper's Stage II settings).
SUPERVISED_KEY = "supervised"
# Config section of per-recipe settings applied to --stage stage1.
RECIPES_KEY = "recipes"
# Config section applied to --stage phage.
PHAGE_KEY = "phage"


def _read_config(path: str) -> dict:
    text = Path(path).read_text()
    return (yaml.safe_load(text) if path.endswith((".yaml", ".yml")) else json.loads(text)) or {}


def _config_to_argv(values: dict, stage: str, recipe: str | None = None) -> list:
    values = dict(values)
    overrides = values.pop(SUPERVISED_KEY, None) or {}
    by_recipe = values.pop(RECIPES_KEY, None) or {}
    phage = values.pop(PHAGE_KEY, None) or {}
    unknown = sorted(set(by_recipe) - set(defaults.RECIPES))
    if unknown:
        raise ValueError(
            f"config section {RECIPES_KEY}: unknown recipe(s) {unknown}; "
            f"known: {list(defaults.RECIPES)}"
        )
    if stage in ("stage2", "sft"):
        values = {**values, **overrides}
    elif stage == "phage":
        values = {**values, **phage}
    elif recipe:
        values = {**values, **(by_recipe.get(defaults.base_recipe(recipe)) or {})}
    argv = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, (list, dict)):
            value = json.dumps(value) if isinstance(value, dict) else ",".join(map(str, value))
        argv += [f"--{key}", str(value)]
    return argv


def _option(argv: list, name: str, values: dict, default=None):
    """The value of --name on the command line, else the config file's, else ``default``."""
    for i, arg in enumerate(argv):
        if arg == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return values.get(name, default)


def _recipe(argv: list, values: dict) -> str | None:
    """--recipe, else the recipe in the manifest of --train_data (None when unknown)."""
    recipe = _option(argv, "recipe", values)
    data = _option(argv, "train_data", values)
    manifest = Path(data) / "_manifest.json" if data else None
    if recipe is None and manifest is not None and manifest.exists():
        recipe = json.loads(manifest.read_text()).get("recipe")
    return recipe


def parse(argv: list | None = None):
    """(ModelArguments, DataArguments, XembedTrainingArguments) from a config file and/or flags."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0].endswith((".yaml", ".yml", ".json")):
        values = _read_config(argv[0])
        rest = argv[1:]
        stage = _option(rest, "stage", values, "stage1")
        argv = _config_to_argv(values, stage, _recipe(rest, values)) + rest
    # no prefix matching: a config key `learning_rat` (or `--learn`) is refused as unknown
    # instead of setting learning_rate
    parser = HfArgumentParser(
        (ModelArguments, DataArguments, XembedTrainingArguments), allow_abbrev=False
    )
    try:
        return parser.parse_args_into_dataclasses(args=argv)
    except ValueError as error:
        if "support bf16/gpu" not in str(error):
            raise
        # transformers: "Your setup doesn't support bf16/gpu. You need to assign use_cpu ..."
        raise ValueError(
            "--bf16 true (configs/paper.yaml) trains on a GPU and torch sees none on this "
            "machine: run it on a GPU node, or pass --use_cpu true (bf16 on the CPU, slow) or "
            "--bf16 false"
        ) from None
