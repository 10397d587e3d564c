"""Print the table contracts as Markdown: ``python -m schemas [table ...]``."""

from __future__ import annotations

import sys

from schemas.tables import TABLES

HEADER = (
    "# Table contracts\n\nGenerated from schemas/tables.py by `python -m schemas > docs/TABLES.md`;"
    " do not edit by hand. Paths are relative to the lake root.\n"
)


def markdown(names: list[str]) -> str:
    out = [] if names else [HEADER]
    for name in names or list(TABLES):
        spec = TABLES[name]
        keys = f" Key: ({', '.join(spec.keys)})." if spec.keys else ""
        parts = f" Partitioned by {', '.join(spec.partition_by)}." if spec.partition_by else ""
        out.append(f"#### `{spec.name}`\n\n{spec.description}{keys}{parts}\n")
        out.append("| column | type | null | meaning |\n|---|---|---|---|")
        for c in spec.columns:
            doc = c.doc.replace("|", "\\|")
            out.append(f"| {c.name} | `{c.type}` | {'yes' if c.nullable else 'no'} | {doc} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(sys.argv[1:]))
