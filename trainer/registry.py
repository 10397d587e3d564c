"""Model registry: one row per finished training run.

With a lake, the row goes to the Delta table ``<lake>/models/registry`` (written by Spark,
replacing any earlier row of the same model_id); the same row is always written as
``registry.json`` next to the model, so runs without a lake stay traceable.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path


def registry_row(**fields) -> dict:
    row = {"created_at": datetime.now(UTC), **fields}
    row["config_json"] = json.dumps(row.get("config_json") or {}, sort_keys=True, default=str)
    return row


def write_registry(
    row: dict, output_dir: str, lake: str | None = None, extra: dict | None = None
) -> None:
    """``extra`` (e.g. the trainer's runtime metrics) goes to registry.json only."""
    record = {**row, **(extra or {})}
    Path(output_dir, "registry.json").write_text(
        json.dumps(record, indent=2, default=str, sort_keys=True)
    )
    if not lake:
        return
    from schemas import table
    from spark_jobs.lib.lake import write_table
    from spark_jobs.lib.session import build_session

    spark = build_session("xembed-registry", "local[1]")
    frame = spark.createDataFrame([row], table("models/registry").spark_schema())
    write_table(
        spark, frame, lake, "models/registry", replace_where=f"model_id = '{row['model_id']}'"
    )
