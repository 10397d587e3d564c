"""The encoder: any Hugging Face model + pooling + L2 norm, with query instructions and LoRA.

Qwen3-Embedding conventions: last-token pooling over a sequence that ends with the EOS
token, an instruction on queries only (``Instruct: {task}\\nQuery:{text}``), none on
documents. BERT-style models use mean pooling.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

# Language-specific patent-retrieval instructions (queries only). Unknown languages use "en".
INSTRUCTIONS = {
    "en": "Given a patent, retrieve prior-art patents that are X-category references against it",
    "zh": "给定一件专利，检索构成其X类对比文件的现有技术专利",
    "ja": "特許が与えられたとき、その特許に対するXカテゴリ文献となる先行技術特許を検索する",
}
CONFIG_NAME = "xembed_encoder.json"


@dataclass
class EncoderConfig:
    pooling: str = "auto"  # last | mean | auto (last for decoder-only models)
    normalize: bool = True
    max_length: int = 4096
    query_instruction: bool = True
    instructions: dict = field(default_factory=lambda: dict(INSTRUCTIONS))


def format_query(text: str, lang: str | None, config: EncoderConfig) -> str:
    if not config.query_instruction:
        return text
    task = config.instructions.get(lang or "en") or config.instructions["en"]
    return f"Instruct: {task}\nQuery:{text}"


def last_token_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Hidden state of each row's last real token, for left or right padding alike."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    last = (attention_mask.long() * positions).argmax(dim=1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


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


class Encoder(nn.Module):
    """One module for queries and passages: backbone -> pooling -> (L2 norm)."""

    def __init__(self, backbone: nn.Module, tokenizer, config: EncoderConfig):
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.encoder_config = config
        if config.pooling == "auto":
            config.pooling = "last" if _is_decoder(self.base_model) else "mean"
        if config.pooling not in ("last", "mean"):
            raise ValueError(f"pooling must be last, mean or auto, got {config.pooling!r}")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._append_eos = config.pooling == "last" and not self._tokenizer_appends_eos()

    @property
    def base_model(self):
        return getattr(self.backbone, "base_model", self.backbone)

    @property
    def dim(self) -> int:
        return int(self.base_model.config.hidden_size)

    def _tokenizer_appends_eos(self) -> bool:
        eos = self.tokenizer.eos_token_id
        return eos is not None and self.tokenizer("a")["input_ids"][-1] == eos

    # -- model loading -------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls, path: str, config: EncoderConfig | None = None, torch_dtype: torch.dtype | None = None
    ) -> Encoder:
        from transformers import AutoModel, AutoTokenizer

        saved = Path(path) / CONFIG_NAME
        if config is None and saved.exists():
            config = EncoderConfig(**json.loads(saved.read_text()))
        config = config or EncoderConfig()
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = (
            AutoModel.from_pretrained(path, dtype=torch_dtype)
            if torch_dtype
            else AutoModel.from_pretrained(path)
        )
        return cls(model, tokenizer, config)

    def add_lora(
        self, r: int, alpha: int, dropout: float = 0.0, target_modules="all-linear"
    ) -> None:
        """Wrap the backbone with a fresh LoRA adapter (peft)."""
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, bias="none"
        )
        self.backbone = get_peft_model(self.backbone, lora)

    def gradient_checkpointing_enable(self, **kwargs) -> None:
        """Called by the HF Trainer when --gradient_checkpointing is set."""
        self.base_model.gradient_checkpointing_enable(**kwargs)
        if hasattr(self.backbone, "enable_input_require_grads"):
            self.backbone.enable_input_require_grads()  # LoRA: inputs must carry gradients

    # -- encoding --------------------------------------------------------------------------
    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        eos = self.tokenizer.eos_token if self._append_eos else ""
        limit = self.encoder_config.max_length - (1 if self._append_eos else 0)
        batch = self.tokenizer(
            [t for t in texts],
            truncation=True,
            max_length=limit,
            padding=False,
            add_special_tokens=True,
        )
        if eos:
            batch["input_ids"] = [[*ids, self.tokenizer.eos_token_id] for ids in batch["input_ids"]]
            batch["attention_mask"] = [[*m, 1] for m in batch["attention_mask"]]
        padded = self.tokenizer.pad(batch, return_tensors="pt")
        return {"input_ids": padded["input_ids"], "attention_mask": padded["attention_mask"]}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        pooled = (
            last_token_pool(hidden, attention_mask)
            if self.encoder_config.pooling == "last"
            else mean_pool(hidden, attention_mask)
        )
        return F.normalize(pooled, dim=-1) if self.encoder_config.normalize else pooled

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
            out.append(self(**batch).float().cpu())
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
        return self.encode(texts, batch_size)

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
                    "pooling_mode_cls_token": False,
                    "pooling_mode_mean_tokens": self.encoder_config.pooling == "mean",
                    "pooling_mode_max_tokens": False,
                    "pooling_mode_mean_sqrt_len_tokens": False,
                    "pooling_mode_weightedmean_tokens": False,
                    "pooling_mode_lasttoken": self.encoder_config.pooling == "last",
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
        prompts = {
            f"query_{lang}": format_query("", lang, self.encoder_config)
            for lang in self.encoder_config.instructions
        }
        (out / "config_sentence_transformers.json").write_text(
            json.dumps(
                {
                    "prompts": {**prompts, "document": ""},
                    "default_prompt_name": None,
                    "similarity_fn_name": "cosine",
                },
                indent=2,
                ensure_ascii=False,
            )
        )
