"""The evaluation's query families were held out of a trained model's data.

The leakage audits keep every family of ``silver/excluded_families`` out of the training
tables and shards, as the split wrote it *then*. A model trained before ``split.py`` ran again
(another ``--eval-cutoff``, a corpus that grew) may have trained on families that are
evaluation queries now, and its scores would count documents it was trained to retrieve.
Each model of our trainer records the ``silver/excluded_families`` version its shards were
audited against (``registry.json``: ``data_versions``) and the lake (``config_json``); a Stage
II model names its Stage I parent. Before a model is scored, every ancestor's exclusions must
cover the families of the evaluation's queries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from pyspark.sql import SparkSession

from lake import fs, read_table, table_exists, table_path
from lake.snapshots import run_of
from lake.tables import commit_metadata

EXCLUDED = "silver/excluded_families"
REGISTRY = "registry.json"  # written by trainer.registry next to every trained model


class NotHeldOutError(ValueError):
    """A model trained on a family the evaluation queries."""


def trained_ancestors(model_path: str, info: Callable[[str], None] = print) -> list[dict]:
    """The registry rows of ``model_path`` and its ``parent_model`` chain, newest first;
    [] for a model our trainer did not write (a base model, a builtin). A parent that is not
    found here (a path relative to where it trained, a model moved) ends the chain with a
    message: its data cannot be checked."""
    chain, path, seen = [], Path(model_path), set()
    while (path / REGISTRY).is_file() and path.resolve() not in seen:
        seen.add(path.resolve())
        row = json.loads((path / REGISTRY).read_text())
        chain.append(row)
        parent = row.get("parent_model")
        if not parent:
            break
        path = Path(parent)
        if not path.exists() and not parent.startswith("builtin:"):
            info(
                f"held-out check: the parent model {parent!r} of {row.get('model_id')!r} is not "
                f"found from {Path.cwd()}; its training data is not checked (pass its folder "
                "as an absolute path when training, or evaluate from where it trained)"
            )
            break
    return chain


def training_lake(row: dict) -> str | None:
    """The lake a trained model's shards were exported from (recorded since the export
    manifest names it), else the lake its training run named, or None."""
    config = row.get("config_json") or "{}"
    config = json.loads(config) if isinstance(config, str) else config
    return row.get("data_lake") or (config.get("training") or {}).get("lake")


def _writer(spark: SparkSession, lake: str, version: int) -> str | None:
    """The run that committed ``version`` of the lake's excluded families (None: untagged;
    a version whose commit the log no longer holds, or never held, says so)."""
    try:
        return run_of(commit_metadata(spark, table_path(lake, EXCLUDED), version))
    except Exception:  # a lake rebuilt with fewer versions, or its log cleaned up since
        return _NOT_IN_LOG


_NOT_IN_LOG = "(not in the log)"


def _same(a: str, b: str) -> bool:
    here, there = fs.local_path(a), fs.local_path(b)
    return here.resolve() == there.resolve() if here and there else a.rstrip("/") == b.rstrip("/")


def check_held_out(
    spark: SparkSession,
    lake: str,
    model_path: str,
    excluded_version: int,
    query_families: Iterable[str],
    info: Callable[[str], None] = print,
) -> None:
    """Refuse ``model_path`` when a model of its chain trained on data whose exclusions miss a
    family of the evaluation's queries (``lake``'s ``silver/excluded_families`` at
    ``excluded_version``, what the inputs were prepared from)."""
    families = set(query_families)
    for row in trained_ancestors(model_path, info):
        name = f"{row.get('model_id')!r} ({row.get('output_path')})"
        version = (row.get("data_versions") or {}).get(EXCLUDED)
        source = training_lake(row) or lake
        same_lake = _same(source, lake)
        if version is None:
            info(f"held-out check: {name} records no {EXCLUDED} version; not checked")
            continue
        if not table_exists(spark, table_path(source, EXCLUDED)):
            info(f"held-out check: {name} trained on {source}, which is not readable; not checked")
            continue
        # a version number says nothing alone: a lake rebuilt at the same path (another
        # cutoff, a bigger corpus) numbers its versions from 0 again
        run = (row.get("data_runs") or {}).get(EXCLUDED)
        if run is not None and run != (now := _writer(spark, source, version)):
            what = "no longer in its log" if now == _NOT_IN_LOG else f"now run {now}'s"
            info(
                f"held-out check: {name} trained on {EXCLUDED} version {version} of run {run}; "
                f"that version of {source} is {what} (the lake was rebuilt): not checked"
            )
            continue
        if same_lake and version == excluded_version:
            continue  # audited against the exclusions these inputs were prepared from
        try:
            rows = read_table(spark, source, EXCLUDED, version).select("family_id").collect()
        except Exception as error:  # a version removed by VACUUM or a lake rebuilt since
            info(
                f"held-out check: {name}: {EXCLUDED} version {version} of {source} cannot be "
                f"read ({type(error).__name__}); not checked"
            )
            continue
        leaked = sorted(families - {r["family_id"] for r in rows})
        if leaked:
            raise NotHeldOutError(
                f"{name} trained on data audited against {EXCLUDED} version {version} of "
                f"{source}, which did not exclude {len(leaked):,} of the {len(families):,} "
                f"families the evaluation queries (e.g. {', '.join(leaked[:3])}): its scores "
                "would count patents it may have trained on. Train it again on data exported "
                "after this split, or evaluate it with inputs prepared from that split"
            )
