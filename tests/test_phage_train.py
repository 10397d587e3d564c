"""PHAGE end to end below the DAG: the Spark export of claim graphs (training pool only,
audited, landscape), the taxonomy-pairing stream, and `trainer.train --stage phage` with and
without the graph on a real BERT-style encoder, exporting a plain encoder."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from deltalake import DeltaTable
from safetensors import safe_open
from sentence_transformers import SentenceTransformer

from lake import read_pandas
from spark_jobs import claim_graph as claim_graph_job
from spark_jobs import export_training
from tests.conftest import copy_lake
from tests.sample_shards import write_sample_stage1_shards, write_sample_stage2_shards
from trainer import train
from trainer.arguments import parse
from trainer.encoder import Encoder, EncoderConfig
from trainer.models import resolve
from trainer.phage import ClaimGraph, PhageEncoder
from trainer.phage_data import PhageExample, PhageStream, read_phage_examples, subclass_pairs

CONFIG = str(Path(__file__).resolve().parents[1] / "configs" / "cpu-small.yaml")


def pd_rows(folder: str):
    return pq.read_table(folder).to_pandas()


@pytest.fixture(scope="module")
def phage_shards(spark, pipeline, tmp_path_factory):
    """(lake, shard folder, manifest): claim graph + `export_training --dataset phage`."""
    root = tmp_path_factory.mktemp("phage")
    lake = copy_lake(pipeline, root)
    claim_graph_job.run(spark, lake)
    out = str(root / "shards")
    manifest = export_training.run(
        spark, lake, "phage", "parquet", out, rows_per_shard=100, max_chars=400
    )
    return lake, out, manifest


def test_export_holds_each_training_patents_ordered_claims_edges_and_subclasses(
    spark, phage_shards
):
    lake, out, manifest = phage_shards
    claims = read_pandas(lake, "silver/claims", spark)
    excluded = set(read_pandas(lake, "silver/excluded_families", spark).family_id)
    assert set(claims.family_id) & excluded  # the test families do have claims to leave out
    pool = claims[~claims.family_id.isin(excluded)]
    rows = pd_rows(out)
    assert manifest["dataset"] == "phage" and manifest["leakage_audit"]["status"] == "passed"
    assert manifest["rows"] == len(rows) == len(pool.groupby(["publication_number", "lang"]))
    assert not set(rows.family_id) & excluded
    graph = read_pandas(lake, "silver/claim_graph", spark)
    patents = read_pandas(lake, "silver/patents", spark).set_index("publication_number")
    for row in rows.itertuples():
        numbers = list(row.claim_numbers)
        assert numbers == sorted(numbers) and len(numbers) == len(row.claim_texts)
        written = graph[
            (graph.publication_number == row.publication_number) & (graph.lang == row.lang)
        ]
        assert len(row.edges) == len(written)
        assert all(e["src_claim"] in numbers and e["dst_claim"] in numbers for e in row.edges)
        codes = patents.ipc_codes[row.publication_number]
        assert list(row.ipc_subclasses) == sorted({c[:4].upper() for c in codes if len(c) >= 4})
    examples = list(read_phage_examples(out))
    assert len(examples) == len(rows)
    assert any(e.graph.edges for e in examples)
    for example in examples:  # edges are claim indices of the example's own claims
        assert all(0 <= s < len(example.graph.claims) for s, _, _ in example.graph.edges)
        assert all(0 <= d < len(example.graph.claims) for _, d, _ in example.graph.edges)


def test_export_restricts_to_the_landscape(spark, phage_shards, tmp_path):
    lake, _, _ = phage_shards
    out = str(tmp_path / "shards")
    export_training.run(spark, lake, "phage", "parquet", out, landscape=("A", "B"))
    sections = read_pandas(lake, "silver/patents", spark).set_index("publication_number")
    rows = pd_rows(out)
    assert len(rows) and set(sections.ipc_section[rows.publication_number]) <= {"A", "B"}
    with pytest.raises(ValueError, match="Parquet only"):
        export_training.run(spark, lake, "phage", "swift_jsonl", str(tmp_path / "x"))


def example(family: str, subclass: str | None) -> PhageExample:
    return PhageExample(ClaimGraph(("c",)), (subclass,) if subclass else (), frozenset({family}))


def test_subclass_pairs_put_taxonomy_mates_side_by_side():
    stream = [
        example("f1", "A01B"),
        example("f2", "H01M"),
        example("f1", "A01B"),  # the same family: not a mate
        example("f3", "A01B"),
        example("f4", None),
        example("f5", "H01M"),
        example("f6", "G06F"),
    ]
    order = [(e.families, e.subclasses) for e in subclass_pairs(stream)]
    families = [min(f) for f, _ in order]
    assert families == ["f1", "f1", "f3", "f4", "f2", "f5", "f6"]
    assert sorted(families) == sorted(min(e.families) for e in stream)  # nothing lost
    overflow = [min(e.families) for e in subclass_pairs(stream, buffer_size=1)]
    assert sorted(overflow) == sorted(families)


def test_stream_counts_what_it_yields_and_stages_refuse_the_other_data(phage_shards, tmp_path):
    _, out, _ = phage_shards
    stream = PhageStream(out, batch_size=4, seed=3)
    batches = list(stream)
    assert stream.count_batches() == len(batches) > 0
    for batch in batches:  # family-disjoint, and most batches hold a taxonomy positive
        assert len({f for e in batch for f in e.families}) == len(batch)

    def has_mates(batch) -> bool:
        firsts = [e.subclasses[0] for e in batch if e.subclasses]
        return len(set(firsts)) < len(firsts)

    assert sum(map(has_mates, batches)) >= len(batches) // 2
    stage1 = tmp_path / "stage1"
    write_sample_stage1_shards(stage1, n_patents=60, n_shards=1)
    common = ["--output_dir", str(tmp_path / "m"), "--model_name_or_path", "builtin:minilm"]
    with pytest.raises(ValueError, match="only --stage phage"):
        train.main([CONFIG, *common, "--stage", "phage", "--train_data", str(stage1)])
    with pytest.raises(ValueError, match="only --stage phage"):
        train.main([CONFIG, *common, "--stage", "stage1", "--train_data", out])
    # Stage I pairs for Stage II (or SFT) trained without one hard negative, and the other
    # way round; the model never loads
    stage2 = tmp_path / "stage2"
    write_sample_stage2_shards(stage2, n_patents=60, seed=3, negatives=2)
    init = ["--init_model", str(tmp_path / "s1")]
    wrong = [
        (
            ["--stage", "stage2", *init, "--train_data", str(stage1)],
            "'stage1' data; --stage stage2",
        ),
        (["--stage", "sft", "--train_data", str(stage1)], "'stage1' data; --stage sft trains on"),
        (["--stage", "stage1", "--train_data", str(stage2)], "'stage2' data; --stage stage1"),
        (
            ["--stage", "stage2", *init, "--train_data", str(stage2), "--validation_data", out],
            "--validation_data .* holds 'phage' data; --stage stage2 validates on",
        ),
    ]
    for flags, message in wrong:
        with pytest.raises(ValueError, match=message):
            train.main([CONFIG, *common, *flags])
    assert not (tmp_path / "m").exists()


def test_the_phage_config_section_applies_to_phage_only():
    common = ["--train_data", "x", "--output_dir", "y"]
    _, data, phage = parse([CONFIG, *common, "--stage", "phage"])
    _, _, stage1 = parse([CONFIG, *common, "--stage", "stage1"])
    assert (phage.learning_rate, phage.per_device_train_batch_size) == (2e-5, 8)
    assert phage.graph_attention and data.validation_size == 16
    assert stage1.learning_rate == 1e-3  # the profile's own
    model, _, _ = parse([CONFIG, *common, "--stage", "phage"])
    assert model.pooling == "auto"  # the BERT-style base's mean pooling, not cpu-small's last
    _, _, control = parse([CONFIG, *common, "--stage", "phage", "--graph_attention", "false"])
    assert not control.graph_attention


def _train(shards: str, out: Path, lake: str, *extra: str) -> None:
    argv = [
        CONFIG,
        "--stage",
        "phage",
        "--model_name_or_path",
        "builtin:minilm",
        "--train_data",
        shards,
        "--output_dir",
        str(out),
        "--lake",
        lake,
        "--model_id",
        out.name,
        "--max_steps",
        "2",
        "--eval_steps",
        "2",
        "--save_steps",
        "2",
        "--per_device_train_batch_size",
        "4",
        "--max_length",
        "128",
        "--max_chars",  # per claim: several claims share the sequence
        "80",
        "--learning_rate",
        "1e-4",
        "--disable_tqdm",
        "true",
        *extra,
    ]
    assert train.main(argv) == 0


def _checkpoint_bias(out: Path) -> torch.Tensor:
    with safe_open(str(out / "checkpoint-2" / "model.safetensors"), "pt") as f:
        return f.get_tensor("relation_bias")


def test_phage_and_its_no_graph_control_train_and_export_plain_encoders(
    spark, phage_shards, tmp_path
):
    _, shards, _ = phage_shards
    lake = str(tmp_path / "lake")
    graph, control = tmp_path / "phage", tmp_path / "phage-nograph"
    _train(shards, graph, lake)
    _train(shards, control, lake, "--graph_attention", "false")
    # the graph's relation biases learned; the control's stayed zero (plain attention)
    assert _checkpoint_bias(graph).abs().sum() > 0
    assert torch.count_nonzero(_checkpoint_bias(control)) == 0
    texts = ["A rotor blade with a carbon spar cap.", "一种转子叶片。", "ロータブレード。"]
    embeddings = {}
    for out in (graph, control):
        with safe_open(str(out / "model.safetensors"), "pt") as f:
            names = f.keys()  # safe_open is no mapping
        assert not [k for k in names if "relation" in k]  # no graph part exported
        config = json.loads((out / "config.json").read_text())
        assert config.get("_attn_implementation") != "xembed_phage"
        embeddings[out.name] = torch.tensor(
            SentenceTransformer(str(out), device="cpu").encode(texts)
        )
    assert not torch.allclose(embeddings["phage"], embeddings["phage-nograph"], atol=1e-4)
    registry = DeltaTable(f"{lake}/models/registry").to_pandas().set_index("model_id")
    assert set(registry.index) == {"phage", "phage-nograph"}
    assert set(registry.stage) == {"phage"} and set(registry.steps) == {2}
    configs = {m: json.loads(registry.config_json[m])["training"] for m in registry.index}
    assert configs["phage"]["graph_attention"] and not configs["phage-nograph"]["graph_attention"]


def test_phage_refuses_decoders_and_last_token_pooling():
    with pytest.raises(ValueError, match="BERT-style"):
        PhageEncoder(Encoder.from_pretrained(resolve("builtin:qwen3-tiny")))
    minilm = resolve("builtin:minilm")
    with pytest.raises(ValueError, match="pooling auto"):
        PhageEncoder(Encoder.from_pretrained(minilm, EncoderConfig(pooling="last")))
    assert PhageEncoder(Encoder.from_pretrained(minilm, EncoderConfig())).graph


def test_validation_batches_put_taxonomy_mates_side_by_side_as_training_does():
    """Validation was batched as read: 12% of its patents had a same-subclass batch-mate
    against 97% in training, so the kept checkpoint (lowest validation loss) was chosen on
    the topology term nearly alone."""
    import random
    from collections import Counter

    from trainer.data import family_disjoint_batches, validation_batches
    from trainer.phage import ClaimGraph
    from trainer.phage_data import PhageExample
    from trainer.trainer import PhageTrainer, XembedTrainer

    def with_mate(batches):
        found = [
            any(j != i and set(e.subclasses) & set(o.subclasses) for j, o in enumerate(b))
            for b in batches
            for i, e in enumerate(b)
        ]
        return sum(found) / len(found)

    rng = random.Random(0)
    subclasses = [f"{s}{n:02d}K" for s in "ABCDEFGH" for n in (1, 4, 21, 33, 61)]  # 40
    examples = [
        PhageExample(ClaimGraph(()), (rng.choice(subclasses),), frozenset([f"f{i}"]))
        for i in range(64)
    ]
    as_read = validation_batches(examples, 8, XembedTrainer.eval_order)
    paired = validation_batches(examples, 8, PhageTrainer.eval_order)
    assert sorted(id(e) for b in paired for e in b) == sorted(id(e) for e in examples)
    assert as_read == list(family_disjoint_batches(examples, 8, 65, drop_last=False))
    # every patent whose subclass another of the 64 holds, but for one of an odd count
    counts = Counter(e.subclasses[0] for e in examples)
    pairable = sum(n - n % 2 for n in counts.values()) / len(examples)
    assert with_mate(as_read) < 0.3 and with_mate(paired) >= pairable > 0.6
