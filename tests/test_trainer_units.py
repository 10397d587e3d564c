"""Loss maths on embeddings alone, pooling, and the family-disjoint batching."""

import json
import re
import warnings

import pytest
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
from torch.nn import functional

from trainer.data import Example, family_disjoint_batches
from trainer.encoder import first_token_pool, last_token_pool, mean_pool
from trainer.loss import InfoNCELoss, MatryoshkaLoss
from trainer.models import resolve


def unit(*shape, seed=0):
    return functional.normalize(
        torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1
    )


def test_infonce_without_masking_equals_sentence_transformers_mnrl():
    q, p = unit(8, 32, seed=1), unit(8, 32, seed=2)
    n = unit(8, 3, 32, seed=3)
    st = MultipleNegativesRankingLoss(
        SentenceTransformer(resolve("builtin:minilm"), device="cpu"), scale=1 / 0.1
    )
    ours = InfoNCELoss(temperature=0.1, margin=None)
    expected = st.compute_loss_from_embeddings([q, p], labels=None)
    assert torch.allclose(ours(q, p), expected, atol=1e-6)
    # With hard negatives ST appends them as extra candidate columns in the same way.
    expected_n = st.compute_loss_from_embeddings([q, p, *n.unbind(1)], labels=None)
    flat_order = torch.cat([p, n.permute(1, 0, 2).reshape(-1, 32)])
    manual = functional.cross_entropy(q @ flat_order.T / 0.1, torch.arange(8))
    assert torch.allclose(expected_n, manual, atol=1e-6)
    assert torch.allclose(ours(q, p, n), manual, atol=1e-6)  # candidate order does not matter


def test_a_planted_false_negative_is_masked():
    q = functional.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), dim=-1)
    p = functional.normalize(torch.tensor([[1.0, 1.0], [0.0, 1.0]]), dim=-1)  # sim(q0, p0) = 0.71
    n = functional.normalize(
        torch.tensor([[[1.0, 0.0]], [[-1.0, 0.0]]]), dim=-1
    )  # sim(q0, n0) = 1.0
    masked = InfoNCELoss(0.1, margin=0.2)(q, p, n)
    unmasked = InfoNCELoss(0.1, margin=None)(q, p, n)
    sims = q @ torch.cat([p, n.reshape(-1, 2)]).T
    sims[0, 2] = float("-inf")  # n0 beats q0's positive by 0.29 > 0.2: removed
    expected = functional.cross_entropy(sims / 0.1, torch.arange(2))
    assert torch.allclose(masked, expected, atol=1e-6) and masked < unmasked
    assert torch.allclose(InfoNCELoss(0.1, margin=0.5)(q, p, n), unmasked)  # 0.29 < 0.5: kept


def test_matryoshka_total_is_the_weighted_sum_of_truncated_losses():
    q, p, n = unit(6, 16, seed=4), unit(6, 16, seed=5), unit(6, 2, 16, seed=6)
    base = InfoNCELoss(0.1, margin=0.2)
    total = MatryoshkaLoss(base, [4, None], [0.6, 0.4])(q, p, n)
    short = base(
        functional.normalize(q[:, :4], dim=-1),
        functional.normalize(p[:, :4], dim=-1),
        functional.normalize(n[..., :4], dim=-1),
    )
    assert torch.allclose(total, 0.6 * short + 0.4 * base(q, p, n), atol=1e-6)


def test_first_and_last_token_pooling_with_left_and_right_padding():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float).view(2, 4, 3)
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    left = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert torch.equal(last_token_pool(hidden, right), torch.stack([hidden[0, 1], hidden[1, 3]]))
    assert torch.equal(last_token_pool(hidden, left), torch.stack([hidden[0, 3], hidden[1, 3]]))
    assert torch.allclose(mean_pool(hidden, right)[0], hidden[0, :2].mean(0))
    assert torch.equal(first_token_pool(hidden, right), hidden[:, 0])
    assert torch.equal(first_token_pool(hidden, left), torch.stack([hidden[0, 2], hidden[1, 0]]))


def test_batches_never_hold_two_texts_of_one_family():
    examples = [
        Example(str(i), "en", "p", (), frozenset({f})) for i, f in enumerate("AABBCCDDEFGAHH")
    ]
    batches = list(family_disjoint_batches(examples, 3))
    for batch in batches:
        families = [f for e in batch for f in e.families]
        assert len(families) == len(set(families))
    assert all(len(b) == 3 for b in batches)
    seen = [e.query for b in batches for e in b]
    assert len(seen) == len(set(seen)) and len(seen) >= 12
    with pytest.raises(StopIteration):
        next(iter(family_disjoint_batches(examples[:2], 3)))


def test_examples_may_share_a_negative_family_never_a_query_or_positive_one(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trainer.data import BatchStream

    # Stage II rows (query family, positive family, negative families), all with a negative of
    # the hot family H (a popular patent mined as a negative of every query). Row 1's negative
    # is of row 0's positive family, row 2's positive of row 0's query family.
    rows = [("Q0", "P0", ["H", "N0"]), ("Q1", "P1", ["H", "P0"]), ("Q2", "Q0", ["H", "N2"])]
    rows += [(f"Q{i}", f"P{i}", ["H", f"N{i}"]) for i in range(3, 6)]
    table = pa.table(
        {
            "family_id": [q for q, _, _ in rows],
            "positive_family_id": [p for _, p, _ in rows],
            "families": [[q, p, *n] for q, p, n in rows],
            "query_text": [f"q{i}" for i in range(len(rows))],
            "query_lang": ["en"] * len(rows),
            "positive_text": ["p"] * len(rows),
            "negative_texts": [["n", "n"]] * len(rows),
        }
    )
    for folder, data in (("new", table), ("old", table.drop(["positive_family_id"]))):
        (tmp_path / folder).mkdir()
        pq.write_table(data, tmp_path / folder / "s.parquet")
        manifest = {
            "format": "parquet",
            "leakage_audit": {"status": "passed"},
            "shards": [{"file": "s.parquet", "rows": len(rows)}],
            "rows": len(rows),
        }
        (tmp_path / folder / "_manifest.json").write_text(json.dumps(manifest))

    def batches(folder):
        stream = BatchStream(str(tmp_path / folder), 2, 0)
        found = [[e.query for e in b] for b in stream]
        assert stream.count_batches() == len(found)  # the counting pass batches alike
        return found, stream.dropped["dropped_at_end"]

    # The hot negative family repeats within a batch; the two planted conflicts wait for the
    # next batch, and all six examples train.
    assert batches("new") == ([["q0", "q3"], ["q1", "q2"], ["q4", "q5"]], 0)
    # Shards that do not say which family is the positive's: every family is the example's
    # own, as before, and H in every row leaves no batch of two.
    assert batches("old") == ([], 6)


def test_paper_profile_applies_stage2_settings_to_stage2_and_sft_only(tmp_path):
    from pathlib import Path

    from trainer.arguments import parse

    config = str(Path(__file__).resolve().parents[1] / "configs" / "paper.yaml")
    common = [
        "--model_name_or_path",
        "m",
        "--train_data",
        "d",
        "--output_dir",
        "/tmp/xembed-args",
        "--bf16",
        "false",
    ]
    settings = {}
    stages = (("stage1", []), ("stage2", ["--init_model", "s1"]), ("sft", []), ("phage", []))
    for stage, extra in stages:
        with warnings.catch_warnings():  # the profile uses no name transformers deprecates
            warnings.simplefilter("error", FutureWarning)
            _, _, args = parse([config, *common, "--stage", stage, *extra])
        settings[stage] = (
            args.learning_rate,
            args.per_device_train_batch_size,
            args.gradient_accumulation_steps,
            args.activation_checkpointing,
        )
    assert settings == {
        "stage1": (1e-4, 128, 1, True),
        "stage2": (5e-5, 16, 4, True),
        "sft": (5e-5, 16, 4, True),
        "phage": (2e-5, 32, 1, False),  # the graph bias exists only in the forward pass
    }
    _, _, args = parse([config, *common, "--stage", "sft", "--learning_rate", "1e-5"])
    assert args.learning_rate == 1e-5  # the command line still wins
    if not torch.cuda.is_available():  # transformers said "Your setup doesn't support bf16/gpu"
        without = [a for a in common if a not in ("--bf16", "false")]
        with pytest.raises(ValueError, match=r"--bf16 true .* torch sees none on this machine"):
            parse([config, *without])
        assert parse([config, *without, "--use_cpu", "true"])[2].bf16
    # the paper config asked for 2 loader workers, which no loader of ours used
    assert args.dataloader_num_workers == 0
    with pytest.raises(ValueError, match="--dataloader_num_workers 2 would be ignored"):
        parse([config, *common, "--dataloader_num_workers", "2"])
    # a key or flag that is only a prefix of one (`learning_rat`) set it by argparse's
    # abbreviation matching; it is refused as unknown, like any other typo
    typo = tmp_path / "typo.yaml"
    typo.write_text("learning_rat: 0.5\n")
    for argv in ([str(typo), *common], [config, *common, "--learn", "0.5"]):
        with pytest.raises(ValueError, match="not used by the HfArgumentParser: \\['--learn"):
            parse(argv)


def test_a_recipe_section_applies_to_its_pairs_and_matched_controls(tmp_path):
    import json
    from pathlib import Path

    from trainer.arguments import parse

    config = str(Path(__file__).resolve().parents[1] / "configs" / "cpu-e5.yaml")
    shards = tmp_path / "shards"
    shards.mkdir()

    def recipe_args(recipe, *extra):
        (shards / "_manifest.json").write_text(json.dumps({"recipe": recipe}))
        common = ["--train_data", str(shards), "--output_dir", str(tmp_path / "out")]
        return parse([config, *common, *extra])

    for recipe, instructed in (("qaecter", False), ("qaecter-matched-r3", False), ("r4", True)):
        model, data, _ = recipe_args(recipe)
        assert model.query_instruction is instructed, recipe
        assert data.recipe is None  # the trainer takes the manifest's recipe at start
    model, data, _ = recipe_args("r4", "--recipe", "qaecter")  # the flag names the section
    assert model.query_instruction is False and data.recipe == "qaecter"
    model, _, _ = recipe_args("qaecter", "--stage", "sft")  # Stage II settings, no recipe
    assert model.query_instruction is True


def test_the_trainer_refuses_a_recipe_its_shards_do_not_hold(tmp_path):
    import json

    from trainer.train import main

    shards = tmp_path / "shards"
    shards.mkdir()
    manifest = {"recipe": "r4", "format": "parquet", "leakage_audit": {"status": "passed"}}
    (shards / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="holds the pairs of 'r4'"):
        main(
            [
                "--model_name_or_path",
                "builtin:qwen3-tiny",
                "--train_data",
                str(shards),
                "--output_dir",
                str(tmp_path / "out"),
                "--recipe",
                "qaecter",
                "--use_cpu",
                "true",
            ]
        )


@pytest.mark.parametrize(
    "dims, weights, message",
    [
        ("-5", "1", r"expected integers >= 1 or 'full', got '-5'"),
        ("64,full", "1", r"one weight >= 0 per --matryoshka_dims value \('64,full'\)"),
        ("64,full", "1,-1", r"one weight >= 0 per --matryoshka_dims value"),
    ],
)
def test_matryoshka_dims_and_weights_are_checked_when_parsed(dims, weights, message, tmp_path):
    """Before, `--matryoshka_dims -5` trained on all but the last five dims, and a weight
    count that did not match failed only once the model had loaded."""
    from trainer.arguments import parse

    argv = ["--model_name_or_path", "m", "--train_data", "d", "--output_dir", str(tmp_path)]
    with pytest.raises(ValueError, match=message):
        parse([*argv, "--matryoshka_dims", dims, "--matryoshka_weights", weights])
    _, _, args = parse(argv)
    assert args.dims() == [64, None] and args.weights() == [0.6, 0.4]


def test_a_model_id_that_is_no_label_is_refused_when_parsed(tmp_path):
    """The id is a value in the registry's SQL predicate: a quote broke (or widened) it."""
    from trainer.arguments import parse

    argv = ["--model_name_or_path", "m", "--train_data", "d", "--output_dir", str(tmp_path)]
    with pytest.raises(ValueError, match=r"--model_id: expected letters, .* got \"x' OR 'a'='a\""):
        parse([*argv, "--model_id", "x' OR 'a'='a"])
    assert parse([*argv, "--model_id", "stage1-v2"])[2].model_id == "stage1-v2"


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--max_chars", "-5", "--max_chars must be >= 1, got -5"),  # was text[:-5]
        ("--validation_size", "-3", "--validation_size must be >= 0"),  # was: no validation
        ("--buffer_size", "0", "--buffer_size must be >= 1"),
        ("--max_length", "0", "--max_length must be >= 1"),
        ("--lora_r", "0", "--lora_r must be >= 1"),  # peft failed after the model loaded
        ("--gradient_accumulation_steps", "0", "--gradient_accumulation_steps must be >= 1"),
        ("--learning_rate=-1e-4", None, "--learning_rate must be >= 0"),  # gradient ascent
        ("--temperature", "0", "--temperature must be > 0"),
    ],
)
def test_training_numbers_are_checked_when_parsed(flag, value, message, tmp_path):
    from trainer.arguments import parse

    argv = ["--model_name_or_path", "m", "--train_data", "d", "--output_dir", str(tmp_path)]
    with pytest.raises(ValueError, match=message):
        parse([*argv, flag, *([value] if value is not None else [])])


def test_a_family_too_frequent_for_the_buffer_never_shortens_a_batch():
    """20 examples of family A ahead of 8 others, a buffer of 8: the overflow yielded twelve
    one-example batches (no in-batch negative; in a two-process step one rank got none)."""
    examples = [Example(f"a{i}", "en", "p", (), frozenset({"A"})) for i in range(20)]
    examples += [Example(f, "en", "p", (), frozenset({f})) for f in "BCDEFGHI"]
    counts: dict[str, int] = {}
    batches = list(family_disjoint_batches(examples, 4, buffer_size=8, counts=counts))
    assert [[e.query for e in b] for b in batches] == [
        ["a0", "B", "C", "D"],
        ["a1", "E", "F", "G"],
    ]
    # 8 placed, 11 dropped when the buffer was full, 9 left at the end (A x 7, H, I)
    assert counts == {"dropped_family_overflow": 11, "dropped_at_end": 9}


def test_a_model_path_that_holds_no_model_is_named(tmp_path):
    """An empty or wrong folder failed inside transformers with "Couldn't instantiate the
    backend tokenizer from one of: ...", naming neither the path nor what it lacks."""
    with pytest.raises(FileNotFoundError, match=r"does not exist"):
        resolve(str(tmp_path / "missing"))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"holds no model \(no config.json\)"):
        resolve(str(tmp_path))
    with pytest.raises(ValueError, match="unknown builtin model"):
        resolve("builtin:nope")
    (tmp_path / "config.json").write_text("{}")
    assert resolve(str(tmp_path)) == str(tmp_path)


def test_auto_picks_the_first_gpu_torch_sees_and_a_missing_one_is_named(monkeypatch):
    import argparse

    from trainer.devices import device_name, inference_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert inference_device("auto") == inference_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="--device cuda:0: torch sees no CUDA GPU"):
        inference_device("cuda:0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert inference_device("auto") == torch.device("cuda")
    assert inference_device(" cuda:1 ") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"--device cuda:2: this machine has 2 CUDA GPU\(s\)"):
        inference_device("cuda:2")
    for bad in ("gpu", "cuda:x", "", "mps", "CPU"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a device"):
            device_name(bad)  # argparse names the flag
        with pytest.raises(ValueError, match="is not a device"):
            inference_device(bad)


def test_only_the_validation_families_leave_training(tmp_path):
    """Validation holds out whole families drawn from a hash bucket sized ~1.5x
    --validation_size (so that it fills); the bucket's other families left training too,
    unused: here 150 of the 300 examples were gone for 32 validation examples."""
    from tests.sample_shards import write_sample_stage1_shards
    from trainer.data import BatchStream, read_examples, validation_examples

    write_sample_stage1_shards(tmp_path, n_patents=300, seed=5)
    everything = list(read_examples(str(tmp_path)))
    validation, held = validation_examples(str(tmp_path), None, 32, 13, None)
    assert len(validation) == 32 and held == {f for e in validation for f in e.families}
    kept = [e for e in everything if e.families.isdisjoint(held)]
    training = BatchStream(str(tmp_path), 1, 13, exclude_families=held)  # one example a batch
    assert training.count_batches() == len(kept) >= len(everything) - 32 * 5  # 5: largest family


def test_validation_takes_at_most_a_fifth_of_a_small_training_folder(tmp_path):
    """A matched-volume control of ~120 pairs (taxonomy and citation pairs name two families
    each) had 128 validation examples asked of it: held out with their families, they left
    no batch to train on and the DAG's recipe training failed."""
    from tests.sample_shards import write_sample_stage1_shards
    from trainer.data import BatchStream, read_examples, validation_examples

    write_sample_stage1_shards(tmp_path, n_patents=40, seed=5)
    rows = len(list(read_examples(str(tmp_path))))
    validation, held = validation_examples(str(tmp_path), None, 128, 13, None)
    assert 0 < len(validation) <= rows // 5
    assert BatchStream(str(tmp_path), 8, 13, exclude_families=held).count_batches() > 0


def test_a_validation_folder_s_families_leave_training(tmp_path):
    """--validation_data was taken as given: the training folder itself (or another export
    of the same pairs) validated the checkpoint choice on examples the model trained on."""
    from tests.sample_shards import write_sample_stage1_shards
    from trainer.data import BatchStream, read_examples, validation_examples

    write_sample_stage1_shards(tmp_path, n_patents=120, seed=5)
    everything = list(read_examples(str(tmp_path)))
    validation, held = validation_examples(str(tmp_path), str(tmp_path), 16, 13, None)
    assert validation == everything[:16] and held == {f for e in validation for f in e.families}
    training = BatchStream(str(tmp_path), 1, 13, exclude_families=held)
    trained = [e for batch in training for e in batch]
    assert trained and not any(e.families & held for e in trained)
    assert not set(validation) & set(trained)


def test_stage2_validation_holds_out_whole_query_and_positive_families(tmp_path):
    """Without --validation_data, Stage II examples were held out by their smallest family,
    often a negative's: the same query with its other X positive stayed in training (all 40
    validation queries here), so the best checkpoint was chosen on queries it trained on."""
    from tests.sample_shards import write_stage2_shard
    from trainer.data import BatchStream, read_examples, validation_examples

    rows = []
    for q in range(300):
        for k in range(2):  # two X positives; the second is the next query's own family
            positive = f"q{(q + 1) % 300:03d}" if k else f"p{q:03d}"
            negatives = [f"n{(q * 7 + k * 3 + j) % 97:03d}" for j in range(8)]
            rows.append(
                {
                    "family_id": f"q{q:03d}",
                    "positive_family_id": positive,
                    "query_text": f"query {q}",
                    "query_lang": "en",
                    "positive_text": f"positive {positive}",
                    "negative_texts": [f"negative {n}" for n in negatives],
                    "families": [f"q{q:03d}", positive, *negatives],
                }
            )
    write_stage2_shard(tmp_path, rows, "two-positives")

    validation, held = validation_examples(str(tmp_path), None, 40, 13, None)
    assert len(validation) == 40
    assert held == {f for e in validation for f in e.own_families}
    assert all(f[0] in "qp" for f in held)  # no negative's family
    training = [
        e for batch in BatchStream(str(tmp_path), 1, 13, exclude_families=held) for e in batch
    ]
    assert {e.query for e in training}.isdisjoint({e.query for e in validation})
    assert all(e.own_families.isdisjoint(held) for e in training)
    assert not {e.positive for e in training} & {e.positive for e in validation}
    # only those left: every example of other query and positive families trains
    everything = list(read_examples(str(tmp_path)))
    assert len(training) == sum(e.own_families.isdisjoint(held) for e in everything) > 400


def _st_folder(
    tmp_path,
    pooling: str | None = None,
    dense: bool = False,
    include_prompt: bool = True,
    prompts: dict | None = None,
) -> str:
    """all-MiniLM-L6-v2 as a SentenceTransformer folder: copied as the hub has it (``pooling``
    None: mean, the older config format) or saved by sentence-transformers itself with
    ``pooling`` (its current format), ``include_prompt`` and ``prompts`` and, with ``dense``,
    a Dense projection."""
    import shutil

    from sentence_transformers.sentence_transformer.modules import (
        Dense,
        Normalize,
        Pooling,
        Transformer,
    )

    folder = tmp_path / "st"
    if pooling is None:
        shutil.copytree(resolve("builtin:minilm"), folder)
        return str(folder)
    backbone = Transformer(resolve("builtin:minilm"))
    dim = backbone.get_embedding_dimension()
    pool = Pooling(dim, pooling_mode=pooling, include_prompt=include_prompt)
    modules = [backbone, pool] + ([Dense(dim, 64)] if dense else [])
    model = SentenceTransformer(modules=[*modules, Normalize()], device="cpu", prompts=prompts)
    model.save(str(folder))
    return str(folder)


def test_a_sentence_transformers_folder_keeps_its_cls_pooling(tmp_path):
    """A user's model folder (e.g. a BGE-style model, pooled by its [CLS] state) was encoded
    by mean pooling whenever the config left pooling on auto: other embeddings than the
    model's own, silently. auto now follows the folder's SentenceTransformer pooling."""
    from trainer.encoder import Encoder

    folder = _st_folder(tmp_path, "cls")
    encoder = Encoder.from_pretrained(folder)
    assert encoder.encoder_config.pooling == "cls"
    texts = ["a rotor blade with a cooling channel", "電池の負極材料", "一种锂离子电池"]
    ours = encoder.encode_passage(texts)
    theirs = SentenceTransformer(folder, device="cpu").encode(texts, convert_to_tensor=True)
    assert torch.allclose(ours, theirs, atol=1e-5)
    # the hub's older config format (MiniLM as published: mean)
    mean = Encoder.from_pretrained(_st_folder(tmp_path / "m"))
    assert mean.encoder_config.pooling == "mean"
    assert not torch.allclose(mean.encode_passage(texts), ours, atol=1e-2)
    # saved and loaded again, the model keeps [CLS] pooling for both readers
    encoder.save(str(tmp_path / "saved"))
    again = Encoder.from_pretrained(str(tmp_path / "saved"))
    assert again.encoder_config.pooling == "cls"
    saved = SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    assert torch.allclose(saved.encode(texts, convert_to_tensor=True), ours, atol=1e-5)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_an_encoder_model_pads_on_the_right_whatever_its_tokenizer_says(pooling, tmp_path):
    """A BERT-style folder whose tokenizer pads on the left (its tokenizer_config says so) was
    padded on the left: [CLS] pooling took a padding token's state, and the absolute positions
    of the real tokens moved with the batch's longest text, so a text's embedding depended on
    its batch. Encoder models now pad on the right, as they were trained."""
    from trainer.encoder import Encoder

    folder = tmp_path / "st"
    _st_folder(tmp_path, pooling)
    config_file = folder / "tokenizer_config.json"
    config_file.write_text(
        json.dumps({**json.loads(config_file.read_text()), "padding_side": "left"})
    )
    encoder = Encoder.from_pretrained(str(folder))
    assert encoder.tokenizer.padding_side == "left"
    texts = ["a rotor", "a rotor blade with a cooling channel along its leading edge"]
    batched = encoder.encode_passage(texts)
    alone = torch.cat([encoder.encode_passage([text]) for text in texts])
    assert torch.allclose(batched, alone, atol=1e-5)


def test_a_sentence_transformers_folder_keeps_its_token_limit(tmp_path):
    """all-MiniLM-L6-v2's folder says max_seq_length 256; the encoder cut at 512 (its
    positions), so a long text's base-model embedding was not the model's as its users run it.
    A caller's own config (the trainer's max_length) still decides."""
    from trainer.encoder import Encoder, EncoderConfig

    folder = resolve("builtin:minilm")
    encoder = Encoder.from_pretrained(folder)
    assert encoder.encoder_config.max_length == 256
    long = [" ".join(["turbine blade cooling channel"] * 120)]  # ~480 tokens
    theirs = SentenceTransformer(folder, device="cpu").encode(long, convert_to_tensor=True)
    assert torch.allclose(encoder.encode_passage(long), theirs, atol=1e-5)
    own = Encoder.from_pretrained(folder, EncoderConfig(max_length=400))
    assert own.encoder_config.max_length == 400
    assert not torch.allclose(own.encode_passage(long), theirs, atol=1e-3)


def test_pooling_without_the_prompt_tokens_is_refused_only_where_prompts_are_added(tmp_path):
    """include_prompt false (the pooling skips the prompt's tokens) was refused for every
    folder, although it changes nothing where no prompt is added or the pooled token is the
    last one. It is refused where the encoder would mean- or [CLS]-pool prompted texts."""
    from trainer.encoder import Encoder

    texts = ["a rotor blade with a cooling channel", "電池の負極材料"]
    for pooling in ("mean", "cls"):  # no prompts: the model's own embeddings
        folder = _st_folder(tmp_path / pooling, pooling, include_prompt=False)
        encoder = Encoder.from_pretrained(folder)
        assert encoder.encoder_config.prompt_style == "none"
        theirs = SentenceTransformer(folder, device="cpu").encode(texts, convert_to_tensor=True)
        assert torch.allclose(encoder.encode_passage(texts), theirs, atol=1e-5)
        assert torch.allclose(encoder.encode_query(texts), theirs, atol=1e-5)
    e5 = {"query": "query: ", "passage": "passage: "}
    for pooling in ("mean", "cls"):  # sentence-transformers pools after the prompt
        with pytest.raises(
            ValueError,
            match=rf"config.json leaves the prompt tokens out of the {pooling} pooling .*e5",
        ):
            Encoder.from_pretrained(
                _st_folder(tmp_path / f"e5{pooling}", pooling, False, False, e5)
            )
    folder = _st_folder(tmp_path / "e5last", "lasttoken", False, False, e5)
    last = Encoder.from_pretrained(folder)  # the last token is the same either way
    assert (last.encoder_config.prompt_style, last.encoder_config.pooling) == ("e5", "last")
    theirs = SentenceTransformer(folder, device="cpu").encode(
        texts, prompt_name="query", convert_to_tensor=True
    )
    assert torch.allclose(last.encode_query(texts), theirs, atol=1e-5)
    # the same folder with prompts kept in the pooling is the encoder's own arithmetic
    kept = Encoder.from_pretrained(_st_folder(tmp_path / "e5kept", "mean", False, True, e5))
    assert kept.encoder_config.prompt_style == "e5"


@pytest.mark.parametrize(
    ("pooling", "dense", "message"),
    [
        ("max", False, r"1_Pooling/config.json pools by max"),
        (["mean", "max"], False, r"pools by mean \+ max"),
        ("mean", True, r"modules.json lists the module .*Dense \(2_Dense\)"),
    ],
)
def test_a_sentence_transformers_folder_the_encoder_cannot_reproduce_is_refused(
    pooling, dense, message, tmp_path
):
    from trainer.encoder import Encoder

    with pytest.raises(ValueError, match=message):
        Encoder.from_pretrained(_st_folder(tmp_path, pooling, dense))


# Long texts as patents hold them: running Chinese and Japanese without blanks, English, runs
# of symbols and blanks that one token spans, marks that combine with the letter before.
LONG_TEXTS = [
    "一种锂离子电池，其特征在于，包括正极、负极和隔膜所述正极包含磷酸铁锂" * 1500,
    "正極と負極とを備える電池であって前記正極がリチウムを含む【請求項１】" * 1500,
    "The battery comprises an anode, a cathode and a separator, wherein the anode. " * 700,
    "=" * 80_000 + " the claims follow",
    " " * 60_000 + "a rotor blade with a cooling channel " * 400,
    ("cafe\u0301 ﾃﾞｰﾀ ＡＢＣ１２３ 1.5 mm " + "x" * 40) * 900,
    "abcdefghij" * 1000,  # one word: WordPiece gives it one unknown token
    "a short abstract",
]


@pytest.mark.parametrize("model", ["builtin:me5-small", "builtin:minilm", "builtin:qwen3-tiny"])
def test_a_long_text_is_tokenized_from_a_prefix_with_the_same_tokens(model):
    """The encoder tokenized every text whole to keep its first max_length tokens: a
    40,000-character description was read whole for 512 tokens. It reads a prefix now, and
    the prefix must give the very tokens the whole text gives."""
    from transformers import AutoTokenizer

    from trainer.encoder import token_prefixes

    tokenizer = AutoTokenizer.from_pretrained(resolve(model))
    for limit in (7, 100, 512):
        whole = tokenizer(LONG_TEXTS, truncation=True, max_length=limit)["input_ids"]
        prefixes = token_prefixes(tokenizer, LONG_TEXTS, limit)
        assert tokenizer(prefixes, truncation=True, max_length=limit)["input_ids"] == whole
        assert all(t.startswith(p) for t, p in zip(LONG_TEXTS, prefixes, strict=True))
        # the running texts are cut to a fraction; the short one is untouched
        assert all(len(p) < len(t) / 4 for p, t in zip(prefixes[:3], LONG_TEXTS[:3], strict=True))
        assert prefixes[-1] == LONG_TEXTS[-1]
        # a prefix holds the margin beyond the kept tokens, or is the whole text (a first
        # prefix too short, as of a run of blanks or of one long word, grew)
        counts = tokenizer(prefixes, add_special_tokens=False)["input_ids"]
        assert all(
            p == t or len(ids) >= limit + 64
            for p, t, ids in zip(prefixes, LONG_TEXTS, counts, strict=True)
        )


def test_without_the_margin_a_prefix_can_change_the_kept_tokens(monkeypatch):
    """The margin is what keeps the cut, which can split a word, beyond the kept tokens."""
    from transformers import AutoTokenizer

    from trainer import encoder as encoder_module
    from trainer.encoder import token_prefixes

    tokenizer = AutoTokenizer.from_pretrained(resolve("builtin:me5-small"))
    whole = tokenizer(LONG_TEXTS, truncation=True, max_length=7)["input_ids"]
    monkeypatch.setattr(encoder_module, "PREFIX_MARGIN_TOKENS", 0)
    monkeypatch.setattr(encoder_module, "PREFIX_CHARS_PER_TOKEN", 1)
    cut = tokenizer(token_prefixes(tokenizer, LONG_TEXTS, 7), truncation=True, max_length=7)
    assert cut["input_ids"] != whole


def test_the_encoder_and_phage_tokenize_a_prefix_of_a_long_text():
    """Encoder.tokenize (training batches, evaluation, mining) and PHAGE's claim tokens read
    a prefix of a long text and keep the whole text's tokens and claim spans."""
    from trainer.encoder import Encoder, EncoderConfig
    from trainer.phage import ClaimGraph, tokenize_claims

    encoder = Encoder.from_pretrained(resolve("builtin:minilm"), EncoderConfig(max_length=64))
    read = []
    real = type(encoder.tokenizer).__call__

    def spy(self, text, *args, **kwargs):
        read.append(sum(map(len, [text] if isinstance(text, str) else text)))
        return real(self, text, *args, **kwargs)

    texts = [LONG_TEXTS[2], LONG_TEXTS[-1]]
    expected = encoder.tokenizer(texts, truncation=True, max_length=64, padding=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(encoder.tokenizer), "__call__", spy)
        batch = encoder.tokenize(texts)
    assert batch["input_ids"].tolist() == expected["input_ids"]
    assert batch["attention_mask"].tolist() == expected["attention_mask"]
    assert read and max(read) < len(LONG_TEXTS[2]) / 10
    claims = ClaimGraph(
        ("A rotor blade. " * 2000, "The blade of claim 1. " * 2000), ((1, 0, "legal"),)
    )
    whole = "\n".join(claims.claims)
    ids, owners = tokenize_claims(encoder.tokenizer, claims, 64)
    assert ids == encoder.tokenizer(whole, truncation=True, max_length=64)["input_ids"]
    assert owners[1:-1] == [0] * 62  # every kept token belongs to the first claim


def test_qwen3_embedding_pools_its_end_of_text_token(tmp_path):
    """Qwen3-Embedding's tokenizer ends every text with <|endoftext|>, its pad token; its eos
    is <|im_end|>, which ends chat turns. The encoder took only the eos for a text's end and
    appended <|im_end|> after <|endoftext|>, so every embedding (training, evaluation, the
    base model's baseline) pooled a token the model was not trained to pool."""
    import shutil

    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    from trainer.encoder import END_OF_TEXT, Encoder

    folder = tmp_path / "qwen3"
    shutil.copytree(resolve("builtin:qwen3-tiny"), folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_special_tokens({"eos_token": "<|im_end|>"})  # as the real tokenizer_config.json
    tokenizer.save_pretrained(folder)
    end = tokenizer.convert_tokens_to_ids(END_OF_TEXT)
    assert tokenizer.pad_token_id == end != tokenizer.eos_token_id

    def last_tokens(encoder):
        batch = encoder.tokenize(["a cup", "a rotor blade with a cooling channel"])
        rows = zip(batch["input_ids"], batch["attention_mask"], strict=True)
        return [ids[mask.bool()].tolist()[-2:] for ids, mask in rows]

    encoder = Encoder.from_pretrained(str(folder))
    assert encoder.encoder_config.pooling == "last"
    last = last_tokens(encoder)
    assert [row[-1] for row in last] == [end, end]
    assert all(row[0] != end and tokenizer.eos_token_id not in row for row in last)
    # a tokenizer that appends nothing (Qwen3-Embedding's first upload): the encoder appends
    # <|endoftext|>, as Qwen's reference code does, not the eos
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(single="$A", pair="$A $B")
    tokenizer.save_pretrained(folder)
    assert AutoTokenizer.from_pretrained(folder)("a cup")["input_ids"][-1] != end
    last = last_tokens(Encoder.from_pretrained(str(folder)))
    assert [row[-1] for row in last] == [end, end]
    assert all(row[0] != end and tokenizer.eos_token_id not in row for row in last)


def test_a_shard_changed_in_place_is_refused_by_its_page_checksums(tmp_path):
    """One character changed for another of the same size (锂 -> 铝) keeps the shard's size
    and row count, all the manifest check reads: the trainer trained on the altered text.
    Spark writes a checksum on every page; the reader now verifies them."""
    from tests.sample_shards import write_stage2_shard
    from trainer.data import read_examples, read_manifest

    row = {
        "family_id": "F1",
        "positive_family_id": "F2",
        "query_text": "一种锂离子电池",
        "query_lang": "zh",
        "positive_text": "正极材料",
        "negative_texts": ["负极"],
        "families": ["F1", "F2", "F3"],
    }
    write_stage2_shard(tmp_path, [row], "crc", compression="none")
    assert [e.query for e in read_examples(str(tmp_path))] == ["一种锂离子电池"]
    shard = tmp_path / "shard-00000.parquet"
    shard.write_bytes(shard.read_bytes().replace("锂".encode(), "铝".encode(), 1))
    read_manifest(str(tmp_path))  # the same size and rows: the footer cannot tell
    with pytest.raises(ValueError, match=r"shard-00000.parquet.*export the data again"):
        list(read_examples(str(tmp_path)))


def test_an_export_in_another_order_is_other_training_data():
    """content_hash sums a hash per row: exports of the same rows with another --seed or
    --rows-per-shard had one identity, so --resume skipped global_step batches of another
    order (some examples trained twice, others never)."""
    from trainer.train import data_identity

    shards = [{"file": "shard-00000.parquet", "rows": 10, "bytes": 900}]
    base = {"content_hash": "0beb2ecb415ae0e2", "seed": 13, "shards": shards}
    assert data_identity(base) == data_identity(json.loads(json.dumps(base)))
    reseeded = {**base, "seed": 14}
    resharded = {**base, "shards": [{**shards[0], "rows": 5}, {**shards[0], "rows": 5}]}
    identities = {data_identity(m) for m in (base, reseeded, resharded)}
    assert len(identities) == 3 and all(i.startswith("0beb2ecb415ae0e2:") for i in identities)
    assert data_identity({"shards": shards}) is None


def test_a_profile_trains_any_base_with_the_bases_own_conventions(tmp_path):
    """cpu-small and paper fixed last-token pooling, cpu-e5 mean pooling and e5 prompts: a
    fine-tune of another base (MiniLM, me5-small under cpu-small) trained with conventions
    its base is not evaluated with, confounding base vs fine-tune."""
    from trainer.arguments import parse
    from trainer.encoder import Encoder
    from trainer.train import build_encoder

    common = ["--train_data", str(tmp_path), "--output_dir", str(tmp_path / "out")]
    for profile, base in (("cpu-small", "builtin:minilm"), ("cpu-e5", "builtin:qwen3-tiny")):
        model, _, args = parse([f"configs/{profile}.yaml", "--model_name_or_path", base, *common])
        trained, path = build_encoder(model, args)
        evaluated = Encoder.from_pretrained(path)
        conventions = [
            (e.encoder_config.pooling, e.encoder_config.prompt_style) for e in (trained, evaluated)
        ]
        assert conventions[0] == conventions[1], (profile, base, conventions)


def test_lora_target_modules_from_a_yaml_list_are_a_list_for_peft():
    """A profile's `lora_target_modules: [q_proj, v_proj]` arrived joined, and peft read
    'q_proj,v_proj' as one module name: NoMatchingPeftModuleError."""
    from trainer.encoder import Encoder
    from trainer.models import resolve

    encoder = Encoder.from_pretrained(resolve("builtin:qwen3-tiny"))
    encoder.add_lora(4, 8, target_modules="q_proj,v_proj")
    assert sorted(encoder.backbone.peft_config["default"].target_modules) == ["q_proj", "v_proj"]


def test_a_phage_folder_resumed_with_another_graph_or_loss_setting_is_another_run(tmp_path):
    """The run identity left out graph_attention, the PHAGE loss weights and LoRA: --resume
    auto went on from the graph model's checkpoint in its no-graph control (and failed loading
    an optimizer state of another parameter set), and other loss weights went on silently."""
    from trainer.arguments import parse
    from trainer.train import _run_identity, check_resumable, own_checkpoint

    out = tmp_path / "out"
    manifest = {"content_hash": "0beb2ecb415ae0e2", "seed": 1, "shards": []}
    common = ["--train_data", str(tmp_path), "--output_dir", str(out), "--stage", "phage"]
    common += ["--model_name_or_path", "builtin:minilm"]

    def identity(*flags):
        model_args, data_args, args = parse([*common, *flags])
        return _run_identity(model_args, data_args, args, manifest)

    check_resumable(str(out), None, identity("--graph_attention", "true"))  # a fresh run
    for flags, change in (
        (("--graph_attention", "false"), "graph_attention was True, now False"),
        (("--graph_attention", "true", "--topology_weight", "0"), "topology_weight was "),
        (
            ("--graph_attention", "true", "--lora", "false"),
            "lora was [64, 32, 'all-linear'], now None",
        ),
        (("--graph_attention", "true", "--temperature", "0.05"), "temperature was 0.1, "),
    ):
        with pytest.raises(ValueError, match=rf"another run \({re.escape(change)}"):
            check_resumable(str(out), str(out / "checkpoint-2"), identity(*flags))
        assert own_checkpoint(str(out), str(out / "checkpoint-2"), identity(*flags)) is None
    same = identity("--graph_attention", "true")
    assert own_checkpoint(str(out), str(out / "checkpoint-2"), same) == str(out / "checkpoint-2")
