"""CPU training runs of the cpu-small profile on a tiny shard: loss, best checkpoint, resume,
saved-model round trip, LoRA merge, registry."""

import json
import warnings
from pathlib import Path

import pytest
import torch
from deltalake import DeltaTable
from sentence_transformers import SentenceTransformer

from tests.sample_shards import write_sample_stage1_shards
from trainer import train
from trainer.encoder import Encoder, EncoderConfig
from trainer.models import resolve
from trainer.trainer import TrainingDiverged

CONFIG = str(Path(__file__).resolve().parents[1] / "configs" / "cpu-small.yaml")
FAST = [
    "--per_device_train_batch_size",
    "8",
    "--per_device_eval_batch_size",
    "8",
    "--max_length",
    "96",
    "--max_chars",
    "400",
    "--validation_size",
    "48",
    "--logging_steps",
    "5",
    "--disable_tqdm",
    "true",
]


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    """A Stage I shard folder: abstract -> claims pairs of generated patents in three languages."""
    folder = tmp_path_factory.mktemp("stage1")
    write_sample_stage1_shards(folder, n_patents=500, seed=21)
    return str(folder)


def argv(shard: str, out: Path, *flags: str) -> list[str]:
    """The cpu-small profile trained on ``shard`` into ``out``, ``flags`` on top."""
    return [CONFIG, *FAST, "--train_data", shard, "--output_dir", str(out), *flags]


def state(output: Path) -> dict:
    last = max(output.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    return json.loads((last / "trainer_state.json").read_text())


def test_cpu_small_run_lowers_validation_loss_keeps_best_and_registers(spark, shard, tmp_path):
    out, lake = tmp_path / "model", str(tmp_path / "lake")
    assert (
        train.main(
            argv(
                shard,
                out,
                "--max_steps",
                "30",
                "--eval_steps",
                "10",
                "--save_steps",
                "10",
                "--eval_on_start",
                "true",
                "--lake",
                lake,
                "--model_id",
                "test-s1",
            )
        )
        == 0
    )
    history = state(out)
    evals = {e["step"]: e["eval_loss"] for e in history["log_history"] if "eval_loss" in e}
    assert set(evals) == {0, 10, 20, 30}
    best_step = min((s for s in evals if s), key=evals.get)
    assert min(evals[s] for s in (10, 20, 30)) < evals[0]  # training lowered the validation loss
    assert history["best_metric"] == pytest.approx(evals[best_step])
    assert history["best_model_checkpoint"].endswith(f"checkpoint-{best_step}")

    # The exported model is the best checkpoint, and SentenceTransformer reproduces it.
    exported = Encoder.from_pretrained(str(out))
    best = Encoder.from_pretrained(
        resolve("builtin:qwen3-tiny"), EncoderConfig(pooling="last", max_length=96)
    )
    from safetensors.torch import load_file

    best.load_state_dict(
        load_file(str(Path(history["best_model_checkpoint"]) / "model.safetensors"))
    )
    texts = ["一种具有齿轮的播种机。", "A seed drill with a gear.", "歯車を備えた播種機。"]
    assert torch.allclose(exported.encode_passage(texts), best.encode_passage(texts), atol=1e-5)
    st = SentenceTransformer(str(out), device="cpu")
    assert torch.allclose(exported.encode_passage(texts), torch.tensor(st.encode(texts)), atol=1e-5)
    query = torch.tensor(st.encode(texts[:1], prompt_name="query_zh"))
    assert torch.allclose(exported.encode_query(texts[:1], ["zh"]), query, atol=1e-5)

    registry = DeltaTable(f"{lake}/models/registry").to_pandas()
    row = registry[registry.model_id == "test-s1"].iloc[0]
    assert (
        row.stage == "stage1"
        and row.steps == 30
        and row.best_val_loss == pytest.approx(evals[best_step])
    )
    assert dict(row.data_versions) == {"gold/stage1_pairs": 0}
    assert json.loads(row.config_json)["model"]["model_name_or_path"] == "builtin:qwen3-tiny"
    assert json.loads((out / "registry.json").read_text())["model_id"] == "test-s1"


def test_resume_continues_the_step_count(shard, tmp_path):
    out = tmp_path / "model"
    flags = ("--save_steps", "5", "--eval_steps", "5", "--load_best_model_at_end", "false")
    common = argv(shard, out, *flags)
    train.main([*common, "--max_steps", "10"])
    first = state(out)
    # the last step's weights are exported without the best model loaded: the registry took
    # the best step's loss for them
    evals = {e["step"]: e["eval_loss"] for e in first["log_history"] if "eval_loss" in e}
    registered = json.loads((out / "registry.json").read_text())
    assert registered["best_val_loss"] == pytest.approx(evals[10])
    # a trained folder as --model_name_or_path is the new model's parent: the held-out check
    # follows parent_model, and weights trained on now-test families went unchecked
    child = tmp_path / "child"
    train.main([*argv(shard, child, *flags), "--model_name_or_path", str(out), "--max_steps", "2"])
    assert json.loads((child / "registry.json").read_text())["parent_model"] == str(out.resolve())
    train.main([*common, "--max_steps", "15", "--resume", "true"])
    second = state(out)
    assert first["global_step"] == 10 and second["global_step"] == 15
    losses = [e["step"] for e in second["log_history"] if "loss" in e]
    assert losses == [5, 10, 15]  # steps 1-10 were not trained again
    # killed while saving checkpoint 15 (trainer_state.json is written last): --resume picked
    # that folder and failed on the missing file; it goes on from step 10 and saves 15 again
    (out / "checkpoint-15" / "trainer_state.json").unlink()
    train.main([*common, "--max_steps", "15", "--resume", "true"])
    assert state(out)["global_step"] == 15
    assert [e["step"] for e in state(out)["log_history"] if "loss" in e] == [5, 10, 15]
    # --resume auto (a retried DAG task): this run's checkpoint, so it goes on from it
    train.main([*common, "--max_steps", "20", "--resume", "auto"])
    assert [e["step"] for e in state(out)["log_history"] if "loss" in e] == [5, 10, 15, 20]
    with pytest.raises(ValueError, match=r"--resume must be one of .*got 'maybe'"):
        train.main([*common, "--max_steps", "20", "--resume", "maybe"])
    # a checkpoint of code that batched by another rule skipped other batches than these
    identity = out / train.RUN_IDENTITY
    recorded = json.loads(identity.read_text())
    identity.write_text(json.dumps({**recorded, "batching": None}))  # before the key existed
    with pytest.raises(ValueError, match=r"belongs to another run \(batching was None, now "):
        train.main([*common, "--max_steps", "20", "--resume", "true"])
    # nor one that held validation out of the shards by another rule: it trained on others
    assert recorded["holdout"]  # no validation folder: held out of the training shards
    identity.write_text(json.dumps({**recorded, "holdout": None}))
    with pytest.raises(ValueError, match=r"belongs to another run \(holdout was None, now "):
        train.main([*common, "--max_steps", "20", "--resume", "true"])
    identity.write_text(json.dumps(recorded))
    # other shards into the same folder: the run went on from step 15 on other data, with
    # the first data's best validation loss and the second's hash in the registry
    other = write_sample_stage1_shards(tmp_path / "other", n_patents=60, seed=5)
    elsewhere = argv(str(tmp_path / "other"), out, *flags)
    with pytest.raises(ValueError, match=r"--resume: .*checkpoint-20 belongs to another run "):
        train.main([*elsewhere, "--max_steps", "20", "--resume", "true"])
    assert (
        other["content_hash"]
        != json.loads(Path(shard, "_manifest.json").read_text())["content_hash"]
    )
    assert state(out)["global_step"] == 20
    # a fresh run on the other shards replaces the folder's checkpoints: they stayed, and a
    # later --resume under the new run's identity went on from the first run's step 20
    train.main([*elsewhere, "--max_steps", "5"])
    steps = sorted(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*"))
    assert steps == [state(out)["global_step"]] and steps[0] <= 5  # one epoch of 60 patents
    # --resume auto over another run's checkpoint trains afresh (records its own identity)
    train.main([*common, "--max_steps", "10", "--resume", "auto"])
    recorded = json.loads((out / "xembed_run.json").read_text())
    assert recorded["train_data"] != other["content_hash"]
    assert state(out)["global_step"] == 10


def test_matryoshka_dims_wider_than_the_model_are_refused(shard, tmp_path):
    """qwen3-tiny has 128 dimensions: `--matryoshka_dims 64,4096` trained the full vector
    under the label 4096 (truncating to 4096 keeps 128)."""
    out = tmp_path / "model"
    with pytest.raises(ValueError, match=r"4096 is wider than the 128 dimensions of "):
        train.main(argv(shard, out, "--matryoshka_dims", "64,4096", "--matryoshka_weights", "1,1"))
    assert not list(out.glob("checkpoint-*"))


def test_a_diverged_run_fails_and_exports_nothing(shard, tmp_path):
    """At this learning rate without clipping the weights turn NaN between the validation at
    step 4 and step 6; the run used to go on to its last step, export the NaN weights and
    register them (the Trainer's best-loss choice never prefers a NaN loss, and its logged
    training loss filters NaN out)."""
    out = tmp_path / "model"
    with pytest.raises(TrainingDiverged) as failure:
        train.main(
            argv(
                shard,
                out,
                "--max_steps",
                "12",
                "--eval_steps",
                "4",
                "--save_steps",
                "4",
                "--logging_steps",
                "2",
                "--learning_rate",
                "1e4",
                "--max_grad_norm",
                "0",
            )
        )
    message = str(failure.value)
    assert "hold NaN or inf at step" in message and "nothing was exported" in message
    assert f"{out / 'checkpoint-4'} (validation loss" in message  # the last finite best
    assert state(out)["global_step"] < 12  # stopped at the first log that saw NaN weights
    assert not (out / "model.safetensors").exists() and not (out / "registry.json").exists()


def test_checkpointed_lora_layers_get_gradients_and_the_gpu_benchmark_runs():
    """The HF Trainer turns --gradient_checkpointing into `activation_checkpointing_enable`
    (transformers 5.x falls back to the deprecated `gradient_checkpointing_enable`, v6 will
    not): each LoRA matrix of a checkpointed layer must still get a gradient. And
    benchmarks/gpu_trainer.py, which no CPU run reached, called the old method with a
    positional argument (a TypeError before its first step); `--smoke` runs its code here.
    Wrapping with LoRA printed transformers' FutureWarning on every training (peft reads the
    deprecated `is_gradient_checkpointing`)."""
    import importlib.util

    encoder = Encoder.from_pretrained(resolve("builtin:qwen3-tiny"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        encoder.add_lora(r=4, alpha=8)
    encoder.activation_checkpointing_enable()
    assert encoder.base_model.is_activation_checkpointing
    encoder.train()
    for name, param in encoder.backbone.named_parameters():
        if "lora_B" in name:  # B starts at zero, so A's gradient would be zero
            param.data.normal_(0, 0.05)
    batch = encoder.tokenize(["a cup with a handle", "a lid for a cup"])
    encoder(**batch).pow(2).sum().backward()
    lora = {n: p.grad for n, p in encoder.backbone.named_parameters() if "lora_" in n}
    assert lora and all(g is not None and g.abs().sum() > 0 for g in lora.values())

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_trainer.py"
    spec = importlib.util.spec_from_file_location("gpu_trainer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--smoke", "--batch", "2", "--length", "32"]) == 0


def test_encoding_with_non_finite_weights_names_the_text(tmp_path):
    encoder = Encoder.from_pretrained(resolve("builtin:minilm"))
    texts = ["a cup", "a lid"]
    assert torch.isfinite(encoder.encode_passage(texts)).all()
    with torch.no_grad():
        encoder.base_model.encoder.layer[0].output.dense.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"embedding of text 0 \('a cup'\) holds NaN"):
        encoder.encode_passage(texts)


def test_lora_merge_equals_base_plus_adapter(tmp_path):
    from peft import PeftModel
    from transformers import AutoModel

    encoder = Encoder.from_pretrained(resolve("builtin:minilm"))
    encoder.add_lora(r=4, alpha=8)
    torch.manual_seed(0)
    for name, param in encoder.backbone.named_parameters():
        if "lora_B" in name:  # B starts at zero; make the adapter do something
            param.data.normal_(0, 0.05)
    texts = ["a cup with a handle", "a lid for a cup"]
    with_adapter = encoder.encode_passage(texts)
    encoder.save(str(tmp_path / "m"))
    merged = Encoder.from_pretrained(str(tmp_path / "m")).encode_passage(texts)
    assert torch.allclose(with_adapter, merged, atol=1e-5)
    base = AutoModel.from_pretrained(resolve("builtin:minilm"))
    with warnings.catch_warnings():  # peft reads transformers' deprecated alias (add_lora)
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated")
        adapter = PeftModel.from_pretrained(base, str(tmp_path / "m" / "adapter"))
    rebuilt = Encoder(adapter, encoder.tokenizer, EncoderConfig(pooling="mean"))
    assert torch.allclose(rebuilt.encode_passage(texts), merged, atol=1e-5)
    assert not torch.allclose(
        merged, Encoder.from_pretrained(resolve("builtin:minilm")).encode_passage(texts)
    )


def test_encode_cli_writes_the_encoders_embeddings(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evaluation import encode

    pq.write_table(
        pa.table({"id": ["a", "b"], "text": ["a cup", "a lid"], "lang": ["en", "en"]}),
        tmp_path / "in.parquet",
    )
    assert (
        encode.main(
            [
                "--model",
                "builtin:minilm",
                "--input",
                str(tmp_path / "in.parquet"),
                "--out",
                str(tmp_path / "out.parquet"),
                "--dims",
                "64",
            ]
        )
        == 0
    )
    out = pq.read_table(tmp_path / "out.parquet").to_pydict()
    expected = torch.nn.functional.normalize(
        Encoder.from_pretrained(resolve("builtin:minilm")).encode_passage(["a cup", "a lid"])[
            :, :64
        ],
        dim=-1,
    )
    assert out["id"] == ["a", "b"]
    assert torch.allclose(torch.tensor(out["embedding"]), expected, atol=1e-6)
    # --device auto: a GPU machine's first GPU, this one's CPU, said in the last line
    where = "cuda" if torch.cuda.is_available() else "cpu"
    assert f"encoded 2 texts on {where} -> {tmp_path / 'out.parquet'}" in capsys.readouterr().err


def test_an_encoder_for_inference_is_moved_to_the_device_and_put_in_eval_mode(monkeypatch):
    """Evaluation and mining encoded on the CPU even on a GPU machine: the model stayed where
    from_pretrained loads it. `meta` stands in for a GPU this machine lacks."""
    from trainer import devices

    monkeypatch.setattr(devices, "inference_device", lambda name: torch.device("meta"))
    encoder = Encoder.for_inference(resolve("builtin:qwen3-tiny"), "cuda")
    assert {p.device.type for p in encoder.parameters()} == {"meta"}
    assert not encoder.training


def test_a_device_the_machine_lacks_is_refused_before_the_model_loads(
    monkeypatch, tmp_path, capsys
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evaluation import encode

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    pq.write_table(pa.table({"id": ["a"], "text": ["a cup"]}), tmp_path / "in.parquet")
    flags = ["--model", "/no/such/model", "--input", str(tmp_path / "in.parquet")]
    for device, message in (
        ("cuda", "--device cuda: torch sees no CUDA GPU on this machine"),
        ("gpu", "argument --device: 'gpu' is not a device: use auto"),
    ):
        with pytest.raises(SystemExit) as stopped:  # the model path is never looked at
            encode.main([*flags, "--out", str(tmp_path / "o.parquet"), "--device", device])
        assert stopped.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "columns, message",
    [
        # the tokenizer failed on the null with "TextEncodeInput must be Union[...]"
        (
            {"id": ["a", "b"], "text": ["a cup", None]},
            r"text is null in 1 rows, the first row 1 \(id b\)",
        ),
        ({"id": ["a", None], "text": ["a cup", "a lid"]}, r"id is null in 1 rows, the first row 1"),
        ({"id": ["a"], "body": ["a cup"]}, r"no column 'text' \(it has id, body"),
    ],
)
def test_encode_cli_names_a_missing_column_or_null_before_loading_the_model(
    columns, message, tmp_path
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evaluation import encode

    pq.write_table(pa.table(columns), tmp_path / "in.parquet")
    flags = ["--model", "/no/such/model", "--input", str(tmp_path / "in.parquet")]
    with pytest.raises(ValueError, match=message):  # the model path is never looked at
        encode.main([*flags, "--out", str(tmp_path / "out.parquet")])
    assert not (tmp_path / "out.parquet").exists()


def test_a_model_retrained_into_its_folder_replaces_its_registry_row(tmp_path):
    """Without --model_id each run gets a new id (it holds the time): rerunning a training
    into the same folder added a second row, the older one describing overwritten weights."""
    from trainer.registry import registry_row, write_registry

    lake, out = str(tmp_path / "lake"), tmp_path / "model"
    out.mkdir()
    for model_id in ("stage1-20261207T200723-62a1c6", "stage1-20261207T200746-62a1c6"):
        row = registry_row(
            model_id=model_id,
            stage="stage1",
            base_model="builtin:qwen3-tiny",
            parent_model=None,
            config_json={},
            data_manifest_hash="h",
            data_versions={"gold/stage1_pairs": 0},
            best_val_loss=None,
            steps=1,
            output_path=str(out),
        )
        write_registry(row, str(out), lake)
    other = registry_row(**{**row, "model_id": "elsewhere", "output_path": str(tmp_path / "b")})
    write_registry(other, str(tmp_path), lake)
    registry = DeltaTable(f"{lake}/models/registry").to_pandas()
    assert sorted(registry.model_id) == ["elsewhere", "stage1-20261207T200746-62a1c6"]
