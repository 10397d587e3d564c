"""Model registry: one row per finished training run.

With a lake, the row goes to the Delta table ``<lake>/models/registry`` (written by Spark,
replacing any earlier row of the same model_id); the same row is always written as
``registry.json`` next to the model, so runs without a lake stay traceable.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from lake import build_session, path_or_uri, write_rows
from lake.tables import sql_string


def registry_row(**fields) -> dict:
    row = {"created_at": datetime.now(UTC), **fields}
    row["config_json"] = json.dumps(row.get("config_json") or {}, sort_keys=True, default=str)
    return row


def write_registry(
    row: dict,
    output_dir: str,
    lake: str | None = None,
    extra: dict | None = None,
    master: str | None = None,
) -> None:
    """``extra`` (e.g. the trainer's runtime metrics) goes to registry.json only; ``master``
    is the Spark master of the lake write (default: $XEMBED_SPARK_MASTER, else local)."""
    record = {**row, **(extra or {})}
    Path(output_dir, "registry.json").write_text(
        json.dumps(record, indent=2, default=str, sort_keys=True)
    )
    if not lake:
        return
    spark = build_session("xembed-registry", master)
    write_rows(
        spark,
        [row],
        path_or_uri(lake),  # a relative path as the trainer's working directory sees it
        "models/registry",
        # a model retrained into the same folder (a default id holds the time) replaces the
        # row of the weights it overwrote
        replace_where=f"model_id = {sql_string(row['model_id'])} "
        f"OR output_path = {sql_string(row['output_path'])}",
    )
