"""Multi-process training on CPU (torchrun, gloo): two ranks train what one process trains on
the same global batch, and a run killed with SIGKILL resumes to the weights of a run that
was never interrupted (README: Reliability)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.sample_shards import write_sample_stage2_shards

REPO = Path(__file__).resolve().parents[1]
CONFIG = str(REPO / "configs" / "cpu-small.yaml")
COMMON = [
    *(CONFIG, "--stage", "sft", "--max_length", "64", "--max_chars", "300"),
    *("--validation_size", "0", "--eval_strategy", "no", "--load_best_model_at_end", "false"),
    *("--logging_steps", "1", "--disable_tqdm", "true", "--warmup_steps", "0"),
    *("--learning_rate", "0.001", "--seed", "13"),
]
pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    """Stage II-shaped examples: a query, its positive and 3 hard negatives each."""
    folder = tmp_path_factory.mktemp("stage2") / "shards"
    write_sample_stage2_shards(folder, n_patents=400, seed=21, negatives=3)
    return str(folder)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command(nproc: int, per_device: int, shard: str, out: Path, *extra: str) -> list[str]:
    """torchrun for nproc > 0; a plain process (one we can SIGKILL whole) for nproc = 0
    (torchrun's workers live in their own process group and outlive a killed launcher)."""
    launcher = (
        [
            *(sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)),
            *("--master-addr", "127.0.0.1", "--master-port", str(_free_port())),
        ]
        if nproc
        else [sys.executable]
    )
    return [
        *launcher,
        "tests/distributed_probe.py",
        *COMMON,
        *("--train_data", shard, "--output_dir", str(out)),
        *("--per_device_train_batch_size", str(per_device), *extra),
    ]


def _env(probe: Path) -> dict:
    return {
        **os.environ,
        "PROBE_OUT": str(probe),
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }


def _run(nproc: int, per_device: int, shard: str, out: Path, probe: Path, *extra: str) -> None:
    done = subprocess.run(
        _command(nproc, per_device, shard, out, *extra),
        cwd=REPO,
        env=_env(probe),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-4000:]


def _records(probe: Path, rank: int) -> list[dict]:
    path = Path(f"{probe}.rank{rank}")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _weights(out: Path) -> dict[str, torch.Tensor]:
    weights: dict[str, torch.Tensor] = {}
    for file in sorted(out.glob("*.safetensors")):
        weights.update(load_file(file))
    assert weights, f"no weights saved in {out}"
    return weights


def test_two_ranks_train_what_one_process_trains_on_the_global_batch(shard, tmp_path):
    # Adam divides each gradient by its running RMS plus epsilon, so a gradient at float-noise
    # scale (an embedding row barely in the batch, ~1e-9) becomes an update of up to lr; one
    # process and two ranks sum in different orders, so their noise differs (default 1e-8: one
    # embed_tokens element 3.2e-4 apart on an AMD EPYC). 1e-6 keeps such updates under lr / 100
    # while every real gradient (> 1e-5) still moves its weight by ~lr a step.
    steps = ("--max_steps", "3", "--save_strategy", "no", "--adam_epsilon", "1e-6")
    _run(1, 8, shard, tmp_path / "one", tmp_path / "one.probe", *steps)
    _run(2, 4, shard, tmp_path / "two", tmp_path / "two.probe", *steps)

    single = _records(tmp_path / "one.probe", 0)
    ranks = [_records(tmp_path / "two.probe", r) for r in (0, 1)]
    assert [r["step"] for r in single] == [0, 1, 2]
    for step, one in enumerate(single):
        first, second = ranks[0][step], ranks[1][step]
        assert first["step"] == second["step"] == step
        # the global batch is split by example: each keeps its own 3 negatives, in order
        for rows in ("queries", "positives", "negatives"):
            assert first[rows] + second[rows] == one[rows], (step, rows)
        assert len(first["negatives"]) == 3 * len(first["queries"]) == 12
        # after the gather every rank's loss saw the whole batch's candidates (8 + 24 rows
        # per Matryoshka dimension), exactly as the single process did
        assert first["gathered_rows"] == second["gathered_rows"] == one["gathered_rows"]
        assert one["gathered_rows"][:2] == [8, 24]
        # the global loss is the mean of the ranks' losses over their halves
        assert (first["loss"] + second["loss"]) / 2 == pytest.approx(one["loss"], abs=2e-5)

    one, two = _weights(tmp_path / "one"), _weights(tmp_path / "two")
    assert one.keys() == two.keys()
    for name in one:  # the same updates: gradients of the global loss on both ranks (lr x 3
        # steps is 3e-3)
        torch.testing.assert_close(two[name], one[name], atol=1e-4, rtol=0, msg=name)


def test_a_run_killed_with_sigkill_resumes_to_the_uninterrupted_weights(shard, tmp_path):
    run = ("--max_steps", "8", "--save_strategy", "steps", "--save_steps", "2")
    _run(0, 8, shard, tmp_path / "whole", tmp_path / "whole.probe", *run)

    out, probe = tmp_path / "killed", tmp_path / "killed.probe"
    process = subprocess.Popen(
        _command(0, 8, shard, out, *run),
        cwd=REPO,
        env=_env(probe),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 900
    # step 3 starts only after checkpoint-2 is complete: kill as soon as it is recorded
    while not any(r["step"] >= 2 for r in _safe_records(probe)):
        assert process.poll() is None, "training ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]

    _run(0, 8, shard, out, probe, *run, "--resume", "true")
    steps = [r["step"] for r in _records(probe, 0)]
    assert steps[-6:] == [2, 3, 4, 5, 6, 7]  # resumed after step 2, nothing trained twice
    whole, resumed = _weights(tmp_path / "whole"), _weights(out)
    for name in whole:
        torch.testing.assert_close(resumed[name], whole[name], atol=1e-6, rtol=1e-5, msg=name)


def _safe_records(probe: Path) -> list[dict]:
    path = Path(f"{probe}.rank0")
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            break
    return records
