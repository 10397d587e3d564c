"""The benchmarks' own bookkeeping (their measurements run under `make bench`, not here)."""

import argparse
import json

import pytest

from benchmarks import quality


def test_quality_reuse_labels_the_result_with_the_lakes_own_build(tmp_path, capsys):
    """`quality.py --reuse` wrote the command line's corpus and settings into the result: a
    lake built at seed 23 and scored without --seed 23 was labelled seed 11."""
    args = argparse.Namespace(
        patents=3000,
        seed=11,
        difficulty="hard",
        train_steps=60,
        mine_k=100,
        validation_size=64,
        eval_max_length=128,
    )
    with pytest.raises(SystemExit, match=r"--reuse needs .*conf\.json"):
        quality.built_with(args, tmp_path)
    conf = {
        "sample_patents": 1500,
        "sample_options": "--difficulty easy",
        "seed": 23,
        "mine_k": 100,
        "validation_size": 64,
        "train_steps": 5,
        "eval_max_length": 128,
    }
    (tmp_path / quality.CONF).write_text(json.dumps(conf))
    quality.built_with(args, tmp_path)
    assert (args.patents, args.seed, args.train_steps, args.difficulty) == (1500, 23, 5, "easy")
    assert "built with seed=23, not 11" in capsys.readouterr().err
