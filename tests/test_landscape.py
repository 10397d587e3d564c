"""--landscape restricts Stage I and Stage II training data to patents of some IPC sections."""

from __future__ import annotations

import argparse

import pytest
from pyspark.sql import functions as F

from lake import landscape, read_table
from spark_jobs import build_pairs, prepare_retrieval
from tests.conftest import copy_lake


def test_the_landscape_argument_names_what_is_not_a_section():
    assert landscape("h, G,h") == ("G", "H")
    assert landscape("") == ()
    with pytest.raises(argparse.ArgumentTypeError, match=r"\['Z'\] are not IPC sections"):
        landscape("G,Z")


@pytest.mark.spark
def test_pairs_and_stage2_inputs_come_only_from_landscape_patents(spark, pipeline, tmp_path):
    lake = copy_lake(pipeline, tmp_path)
    patents = read_table(spark, lake, "silver/patents")
    sections = {r["publication_number"]: r["ipc_section"] for r in patents.collect()}
    everywhere = build_pairs.run(spark, lake)["pairs_written"]
    inside = build_pairs.run(spark, lake, landscape=("G", "H"))["pairs_written"]
    pairs = read_table(spark, lake, "gold/stage1_pairs").collect()
    assert 0 < inside == len(pairs) < everywhere
    assert {sections[r["anchor_id"]] for r in pairs} <= {"G", "H"}
    assert {sections[r["positive_id"]] for r in pairs} <= {"G", "H"}
    assert build_pairs.run(spark, lake)["pairs_written"] == everywhere  # no landscape: all

    out = str(tmp_path / "retrieval")
    stale = tmp_path / "retrieval" / "bm25" / "de"  # an earlier preparation's language
    stale.mkdir(parents=True)
    (stale / "part-0.json").write_text('{"id": "DE-1-A", "contents": "Ein Ventil"}\n')
    manifest = prepare_retrieval.run(spark, lake, out, landscape=("G", "H"))
    bm25_folders = {p.name for p in (tmp_path / "retrieval" / "bm25").iterdir()}
    assert bm25_folders == set(manifest["bm25_documents"])  # evaluation.index indexes each
    queries = spark.read.parquet(f"{out}/queries").select("query_id").distinct().collect()
    candidates = spark.read.parquet(f"{out}/candidates").collect()
    assert manifest["query_patents"] == len(queries) > 0
    assert {sections[r["query_id"]] for r in queries} <= {"G", "H"}
    assert {sections[r["id"]] for r in candidates} <= {"G", "H"}
    outside = patents.where(~F.col("ipc_section").isin("G", "H")).count()
    assert outside > 0  # the sample has patents the landscape left out
