"""The encoder: any Hugging Face model + pooling + L2 norm, with its family's prompts and LoRA.

Each model family's conventions (``prompt_style``), stored with the model in
``xembed_encoder.json`` and in its SentenceTransformer prompts, so a fine-tuned model keeps
its base's:

- ``instruct`` (Qwen3-Embedding): last-token pooling over a sequence that ends with the EOS
  token, an instruction on queries only (``Instruct: {task}\\nQuery:{text}``), none on
  documents;
- ``e5`` (multilingual-e5): ``query: `` / ``passage: `` prefixes, mean pooling;
- ``none``: the texts as they are (e.g. all-MiniLM), mean pooling.

``auto`` takes the saved conventions of the model folder, else ``instruct`` for decoder
models, ``e5`` where the folder's SentenceTransformer prompts are e5's, else ``none``.

Pooling (``last``, ``mean`` or ``cls``): ``auto`` takes the saved conventions, else the
folder's SentenceTransformer pooling (``1_Pooling/config.json``), else ``last`` for decoder
models and ``mean`` for the others. A folder whose SentenceTransformer modules this encoder
cannot reproduce (a ``Dense`` projection, max pooling, ...) is refused when loaded rather than
encoded into other vectors than the model's own.
"""

from __future__ import annotations

import inspect
import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

from trainer import devices

# Qwen's end-of-document token: Qwen3-Embedding pools the state of this last token.
END_OF_TEXT = "<|endoftext|>"
# Language-specific patent-retrieval instructions (queries only). Unknown languages use "en".
INSTRUCTIONS = {
    "en": "Given a patent, retrieve prior-art patents that are X-category references against it",
    "zh": "给定一件专利，检索构成其X类对比文件的现有技术专利",
    "ja": "特許が与えられたとき、その特許に対するXカテゴリ文献となる先行技術特許を検索する",
}
CONFIG_NAME = "xembed_encoder.json"
PROMPT_STYLES = ("instruct", "e5", "none")
E5_PREFIXES = {"query": "query: ", "passage": "passage: "}
POOLINGS = ("last", "mean", "cls")
# The SentenceTransformer modules the encoder reproduces: backbone, pooling, L2 norm
ST_MODULES = ("Transformer", "Pooling", "Normalize")
# The Pooling modes it has. A Pooling config names its mode as ``pooling_mode`` (as the
# installed sentence-transformers 6 writes it) or with one ``pooling_mode_<name>`` flag per
# mode (older folders, most models on the hub).
ST_POOLING_MODES = {"lasttoken": "last", "mean": "mean", "cls": "cls"}
ST_LEGACY_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# Characters per kept token of a text's first prefix (see token_prefixes) and the tokens a
# prefix must hold beyond the kept ones before the rest of the text is left unread.
PREFIX_CHARS_PER_TOKEN = 8
PREFIX_MARGIN_TOKENS = 64


def token_prefixes(tokenizer, texts: list[str], max_length: int) -> list[str]:
    """Each text, or a prefix of it that tokenizes to the same first ``max_length`` tokens.

    A fast tokenizer reads the whole text even when it keeps only ``max_length`` tokens: a
    patent description of 40,000 characters costs 13-16 ms to keep 512 tokens, longer than a
    GPU takes to encode it. A text longer than twice its first guess (8 characters per kept
    token) is cut there; the prefix is kept when it holds at least 64 tokens more than
    ``max_length``, else it grows fourfold until it does or holds the whole text (runs of
    blanks or symbols a single token spans). The margin keeps the cut, which can change the
    tokens of the word it splits, beyond every kept token. One limit: a Unigram tokenizer
    (XLM-R's) segments a whole unbroken run at once, so in a run of thousands of characters
    without a blank ("0000...", "xxxx...") the cut can change the run's first tokens too (1-2
    tokens in such runs; none in measured zh/ja text, DNA and protein sequences)."""
    out = list(texts)
    need = max_length + PREFIX_MARGIN_TOKENS
    chars = need * PREFIX_CHARS_PER_TOKEN
    pending = [i for i, text in enumerate(texts) if len(text) > 2 * chars]
    while pending:
        heads = [texts[i][:chars] for i in pending]
        counted = tokenizer(
            heads, add_special_tokens=False, truncation=True, max_length=need, padding=False
        )["input_ids"]
        short = []
        for i, head, ids in zip(pending, heads, counted, strict=True):
            if len(ids) >= need:
                out[i] = head
            else:
                short.append(i)
        chars *= 4
        pending = [i for i in short if len(texts[i]) > chars]
    return out


@dataclass
class EncoderConfig:
    pooling: str = "auto"  # last | mean | cls | auto (see the module docstring)
    normalize: bool = True
    max_length: int = 4096
    query_instruction: bool = True  # instruct style: False sends queries without instruction
    instructions: dict = field(default_factory=lambda: dict(INSTRUCTIONS))
    prompt_style: str = "auto"  # instruct | e5 | none | auto (see the module docstring)


def format_query(text: str, lang: str | None, config: EncoderConfig) -> str:
    if config.prompt_style == "e5":
        return E5_PREFIXES["query"] + text
    if config.prompt_style == "none" or not config.query_instruction:
        return text
    task = config.instructions.get(lang or "en") or config.instructions["en"]
    return f"Instruct: {task}\nQuery:{text}"


def format_passage(text: str, config: EncoderConfig) -> str:
    return E5_PREFIXES["passage"] + text if config.prompt_style == "e5" else text


def _saved_config(path: Path) -> EncoderConfig | None:
    saved = path / CONFIG_NAME
    if not saved.exists():
        return None
    values = json.loads(saved.read_text())
    if "prompt_style" not in values:  # saved before prompt styles: instructions or nothing
        values["prompt_style"] = "instruct" if values.get("query_instruction", True) else "none"
    return EncoderConfig(**values)


def _folder_prompt_style(path: Path) -> str | None:
    """``e5`` when the folder's SentenceTransformer prompts are e5's ``query: `` / ``passage: ``."""
    st = path / "config_sentence_transformers.json"
    if not st.exists():
        return None
    prompts = json.loads(st.read_text()).get("prompts") or {}
    if prompts.get("query") == E5_PREFIXES["query"]:
        return "e5"
    return None


def _folder_config(path: Path) -> EncoderConfig:
    """The defaults for a folder xembed did not save, with its SentenceTransformer token limit
    (``sentence_bert_config.json``: ``max_seq_length``) where that is lower: all-MiniLM-L6-v2
    embeds 256 tokens, not the 512 its positions allow, and a base model is measured as its
    users run it."""
    config = EncoderConfig()
    st = path / "sentence_bert_config.json"
    limit = json.loads(st.read_text()).get("max_seq_length") if st.exists() else None
    if isinstance(limit, int) and not isinstance(limit, bool) and 0 < limit < config.max_length:
        config.max_length = limit
    return config


def _checkpoint_keys(path: Path) -> set[str] | None:
    """The parameter names of the folder's safetensors checkpoint, None for another format."""
    index = path / "model.safetensors.index.json"
    if index.exists():
        return set(json.loads(index.read_text()).get("weight_map", {}))
    single = path / "model.safetensors"
    if not single.exists():
        return None
    from safetensors import safe_open  # deferred: only model folders are read

    with safe_open(str(single), "pt") as f:
        return set(f.keys())


def _unused_pooler(path: Path) -> dict:
    """``add_pooling_layer=False`` for a BERT-style model whose checkpoint has no pooler (e5
    as sentence-transformers saves it; our fine-tunes of it): the encoder pools the hidden
    states itself, and transformers would otherwise create the pooler with random weights
    and report it MISSING on every load, as if the model were broken."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    keys = _checkpoint_keys(path)
    if keys is None or any("pooler." in key for key in keys):
        return {}
    model_class = MODEL_MAPPING.get(type(AutoConfig.from_pretrained(path)), None)
    if model_class is None or "add_pooling_layer" not in inspect.signature(model_class).parameters:
        return {}
    return {"add_pooling_layer": False}


def _folder_pooling(path: Path) -> tuple[str | None, Path | None]:
    """The pooling of the folder's SentenceTransformer modules (None without ``modules.json``)
    and its Pooling config when that leaves the prompt tokens out (``include_prompt`` false),
    else None; a ValueError naming the file when the modules hold what the encoder does not
    reproduce."""
    listed = path / "modules.json"
    if not listed.exists():
        return None, None
    pooling, without_prompt = None, None
    for module in json.loads(listed.read_text()):
        kind = str(module.get("type", ""))
        name = kind.rsplit(".", 1)[-1]
        if name not in ST_MODULES:
            raise ValueError(
                f"{listed} lists the module {kind} ({module.get('path', '')}): xembed's encoder "
                f"is the backbone, its pooling and an L2 norm ({', '.join(ST_MODULES)}), so it "
                "would not produce this model's embeddings"
            )
        if name == "Pooling":
            config_file = path / str(module.get("path", "")) / "config.json"
            pooling, with_prompt = _st_pooling(config_file)
            without_prompt = None if with_prompt else config_file
    return pooling, without_prompt


def _st_pooling(config_file: Path) -> tuple[str | None, bool]:
    """``last``, ``mean`` or ``cls`` from a SentenceTransformer Pooling config, and whether
    the pooling takes the prompt tokens in (``include_prompt``, true unless it says false)."""
    if not config_file.exists():
        return None, True
    config = json.loads(config_file.read_text())
    named = config.get("pooling_mode")
    if named is not None:
        modes = [named] if isinstance(named, str) else list(named)
    else:
        modes = [mode for flag, mode in ST_LEGACY_POOLING_FLAGS.items() if config.get(flag)]
    if len(modes) != 1 or modes[0] not in ST_POOLING_MODES:
        raise ValueError(
            f"{config_file} pools by {' + '.join(map(str, modes)) or 'no mode'}: xembed's "
            f"encoder pools by exactly one of {', '.join(ST_POOLING_MODES)}"
        )
    return ST_POOLING_MODES[modes[0]], config.get("include_prompt") is not False


def _check_prompt_pooling(config: EncoderConfig, without_prompt: Path | None) -> None:
    """A folder whose pooling leaves the prompt tokens out (``include_prompt`` false) is
    refused when this encoder would add prompts: its mean takes every token, and its [CLS]
    pooling the first one (sentence-transformers takes the first token after the prompt).
    The last token is the same either way, and without prompts there is no token to leave
    out."""
    if without_prompt is None or config.pooling == "last" or config.prompt_style == "none":
        return
    raise ValueError(
        f"{without_prompt} leaves the prompt tokens out of the {config.pooling} pooling "
        f"(include_prompt false), and the {config.prompt_style} prompt style adds them to the "
        "texts: xembed's encoder would pool them in; load it with prompt_style none, or a "
        "folder that pools them"
    )


def last_token_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Hidden state of each row's last real token, for left or right padding alike."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    last = (attention_mask.long() * positions).argmax(dim=1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def first_token_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Hidden state of each row's first real token ([CLS]), for left or right padding alike."""
    first = attention_mask.long().argmax(dim=1)  # the first maximum: the first real token
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), first]


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def _is_decoder(model) -> bool:
    config = getattr(model, "config", None)
    archs = " ".join(getattr(config, "architectures", None) or [])
    return (
        bool(getattr(config, "is_decoder", False))
        or "CausalLM" in archs
        or getattr(config, "model_type", "")
        in {"qwen2", "qwen3", "llama", "mistral", "gemma", "gemma2"}
    )


def _finite(embeddings: torch.Tensor, texts: list[str], start: int) -> torch.Tensor:
    """``embeddings`` (of ``texts[start:]``), or a ValueError naming the first text whose
    embedding holds NaN or inf: such a vector matches nothing in FAISS, so a search would
    quietly return no hits and the metrics would read as a model that finds nothing."""
    bad = (~torch.isfinite(embeddings).all(dim=1)).nonzero().flatten().tolist()
    if bad:
        first = start + bad[0]
        raise ValueError(
            f"the model's embedding of text {first} ({texts[first][:60]!r}) holds NaN or inf, "
            f"as do {len(bad) - 1} others of its batch: the model's weights are not finite "
            "(a diverged training run) or its dtype overflowed"
        )
    return embeddings


class Encoder(nn.Module):
    """One module for queries and passages: backbone -> pooling -> (L2 norm)."""

    def __init__(self, backbone: nn.Module, tokenizer, config: EncoderConfig):
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.encoder_config = config
        if config.pooling == "auto":
            config.pooling = "last" if _is_decoder(self.base_model) else "mean"
        if config.pooling not in POOLINGS:
            raise ValueError(
                f"pooling must be {', '.join(POOLINGS)} or auto, got {config.pooling!r}"
            )
        if config.prompt_style == "auto":  # the model's kind, not a pooling a caller chose
            config.prompt_style = "instruct" if _is_decoder(self.base_model) else "none"
        if config.prompt_style not in PROMPT_STYLES:
            raise ValueError(
                f"prompt_style must be one of {PROMPT_STYLES} or auto, got {config.prompt_style!r}"
            )
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.limit_length(config.max_length)
        self._end_id = self._end_to_append() if config.pooling == "last" else None
        # An encoder (absolute positions from 0, [CLS] first) was trained on right padding,
        # whatever its tokenizer_config says; a decoder keeps its tokenizer's side (Qwen3-
        # Embedding pads on the left and pools the last token, which works for either).
        self._padding_side = None if _is_decoder(self.base_model) else "right"

    def limit_length(self, max_length: int) -> int:
        """Set the token limit of every text to ``max_length``, at most the model's absolute
        positions (a BERT-style encoder such as e5-small cannot embed a 513th token: a longer
        input fails inside the position embeddings); returns the limit set."""
        positions = getattr(self.base_model.config, "max_position_embeddings", None)
        if positions and max_length > positions and not _is_decoder(self.base_model):
            max_length = positions
        self.encoder_config.max_length = max_length
        return max_length

    @property
    def base_model(self):
        return getattr(self.backbone, "base_model", self.backbone)

    @property
    def dim(self) -> int:
        return int(self.base_model.config.hidden_size)

    def _end_to_append(self) -> int | None:
        """The id of the token last-token pooling reads, where the tokenizer does not end every
        text with it itself (None where it does). Qwen3-Embedding's tokenizer ends a text with
        its pad token <|endoftext|>, the token the model pools; its eos <|im_end|> ends chat
        turns. A tokenizer that appends neither gets <|endoftext|> where the vocabulary has it
        (as Qwen's reference code appends), else its eos."""
        tokenizer = self.tokenizer
        ends = {tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}
        if tokenizer("a")["input_ids"][-1] in ends:
            return None
        vocabulary = tokenizer.get_vocab()
        return vocabulary.get(END_OF_TEXT, tokenizer.eos_token_id)

    # -- model loading -------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls, path: str, config: EncoderConfig | None = None, torch_dtype: torch.dtype | None = None
    ) -> Encoder:
        from transformers import AutoModel, AutoTokenizer

        saved = _saved_config(Path(path))
        if config is None:
            config = saved or _folder_config(Path(path))
        else:  # what the caller leaves on auto follows the model (its base's conventions)
            for name in ("pooling", "prompt_style"):
                if getattr(config, name) == "auto" and saved is not None:
                    setattr(config, name, getattr(saved, name))
        pooling, without_prompt = _folder_pooling(Path(path))  # refuses modules it cannot reproduce
        if config.pooling == "auto":
            config.pooling = pooling or "auto"
        if config.prompt_style == "auto":
            config.prompt_style = _folder_prompt_style(Path(path)) or "auto"
        tokenizer = AutoTokenizer.from_pretrained(path)
        options = {"dtype": torch_dtype} if torch_dtype else {}
        model = AutoModel.from_pretrained(path, **options, **_unused_pooler(Path(path)))
        encoder = cls(model, tokenizer, config)  # resolves what is still on auto
        _check_prompt_pooling(encoder.encoder_config, without_prompt)
        return encoder

    @classmethod
    def for_inference(cls, path: str, device: str = "auto") -> Encoder:
        """The model at ``path`` in eval mode on ``device`` (``trainer.devices``), in the
        checkpoint's dtype: an evaluation or mining encoder on a GPU machine encodes there."""
        target = devices.inference_device(device)  # before loading: a missing GPU fails at once
        return cls.from_pretrained(path).to(target).eval()

    def add_lora(
        self, r: int, alpha: int, dropout: float = 0.0, target_modules="all-linear"
    ) -> None:
        """Wrap the backbone with a fresh LoRA adapter (peft)."""
        from peft import LoraConfig, get_peft_model

        if isinstance(target_modules, str) and target_modules != "all-linear":
            # "q_proj,v_proj" (a profile's YAML list, joined): peft would read one regex
            target_modules = [m.strip() for m in target_modules.split(",") if m.strip()]
        lora = LoraConfig(
            r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, bias="none"
        )
        with warnings.catch_warnings():
            # peft reads transformers' deprecated alias of is_activation_checkpointing (its
            # code, not ours): every LoRA training printed the FutureWarning
            warnings.filterwarnings(
                "ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning
            )
            self.backbone = get_peft_model(self.backbone, lora)

    def activation_checkpointing_enable(self, **kwargs) -> None:
        """Called by the HF Trainer when --activation_checkpointing is set (transformers 5.x
        calls the older ``gradient_checkpointing_enable`` only when this is missing, v6 not at
        all)."""
        self.base_model.activation_checkpointing_enable(**kwargs)
        if hasattr(self.backbone, "enable_input_require_grads"):
            self.backbone.enable_input_require_grads()  # LoRA: inputs must carry gradients

    # -- encoding --------------------------------------------------------------------------
    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        end = self._end_id
        limit = self.encoder_config.max_length - (end is not None)
        batch = self.tokenizer(
            token_prefixes(self.tokenizer, texts, limit),
            truncation=True,
            max_length=limit,
            padding=False,
            add_special_tokens=True,
        )
        if end is not None:
            batch["input_ids"] = [[*ids, end] for ids in batch["input_ids"]]
            batch["attention_mask"] = [[*m, 1] for m in batch["attention_mask"]]
        padded = self.tokenizer.pad(batch, padding_side=self._padding_side, return_tensors="pt")
        return {"input_ids": padded["input_ids"], "attention_mask": padded["attention_mask"]}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.pool(hidden, attention_mask)

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Token states -> one (normalised) embedding per row, by the configured pooling."""
        pooling = self.encoder_config.pooling
        if pooling == "last":
            pooled = last_token_pool(hidden, attention_mask)
        elif pooling == "cls":
            pooled = first_token_pool(hidden, attention_mask)
        else:
            pooled = mean_pool(hidden, attention_mask)
        return functional.normalize(pooled, dim=-1) if self.encoder_config.normalize else pooled

    def _device(self) -> torch.device:
        return next(self.parameters()).device

    @torch.no_grad()
    def encode(self, texts: list[str], batch_size: int = 32) -> torch.Tensor:
        was_training = self.training
        self.eval()
        out = []
        for i in range(0, len(texts), batch_size):
            batch = {
                k: v.to(self._device()) for k, v in self.tokenize(texts[i : i + batch_size]).items()
            }
            out.append(_finite(self(**batch).float().cpu(), texts, i))
        self.train(was_training)
        return torch.cat(out) if out else torch.empty(0, self.dim)

    def encode_query(
        self, texts: list[str], langs: list[str | None] | None = None, batch_size: int = 32
    ) -> torch.Tensor:
        langs = langs or [None] * len(texts)
        return self.encode(
            [
                format_query(t, lang, self.encoder_config)
                for t, lang in zip(texts, langs, strict=True)
            ],
            batch_size,
        )

    def encode_passage(self, texts: list[str], batch_size: int = 32) -> torch.Tensor:
        return self.encode([format_passage(t, self.encoder_config) for t in texts], batch_size)

    # -- saving ----------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Adapter (if LoRA) under ``adapter/`` and the merged model in ``path``.

        The layout loads with ``AutoModel.from_pretrained(path)``,
        ``SentenceTransformer(path)`` (pooling, normalisation and the query prompts) and
        ``Encoder.from_pretrained(path)``.
        """
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        model = self.backbone
        if hasattr(model, "peft_config"):
            model.save_pretrained(str(out / "adapter"))
            model = model.merge_and_unload()
            self.backbone = model
        model.save_pretrained(str(out))
        self.tokenizer.save_pretrained(str(out))
        (out / CONFIG_NAME).write_text(
            json.dumps(asdict(self.encoder_config), indent=2, ensure_ascii=False)
        )
        self._write_sentence_transformers_config(out)

    def _write_sentence_transformers_config(self, out: Path) -> None:
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {
                "idx": 1,
                "name": "1",
                "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling",
            },
        ]
        if self.encoder_config.normalize:
            modules.append(
                {
                    "idx": 2,
                    "name": "2",
                    "path": "2_Normalize",
                    "type": "sentence_transformers.models.Normalize",
                }
            )
            (out / "2_Normalize").mkdir(exist_ok=True)
        (out / "modules.json").write_text(json.dumps(modules, indent=2))
        (out / "1_Pooling").mkdir(exist_ok=True)
        (out / "1_Pooling" / "config.json").write_text(
            json.dumps(
                {
                    "word_embedding_dimension": self.dim,
                    **{  # the older flags, which every sentence-transformers version reads
                        flag: ST_POOLING_MODES.get(mode) == self.encoder_config.pooling
                        for flag, mode in ST_LEGACY_POOLING_FLAGS.items()
                    },
                    "include_prompt": True,
                },
                indent=2,
            )
        )
        (out / "sentence_bert_config.json").write_text(
            json.dumps(
                {"max_seq_length": self.encoder_config.max_length, "do_lower_case": False}, indent=2
            )
        )
        config = self.encoder_config
        prompts = {f"query_{lang}": format_query("", lang, config) for lang in config.instructions}
        passage = format_passage("", config)
        prompts.update(query=format_query("", None, config), passage=passage, document=passage)
        (out / "config_sentence_transformers.json").write_text(
            json.dumps(
                {
                    "prompts": prompts,
                    "default_prompt_name": None,
                    "similarity_fn_name": "cosine",
                },
                indent=2,
                ensure_ascii=False,
            )
        )
