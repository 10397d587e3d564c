"""TableSpec: one Delta table contract (path, columns, keys, partitioning) as code."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark SQL DDL type, e.g. "string", "array<struct<text:string,language:string>>"
    nullable: bool = True
    doc: str = ""


@dataclass(frozen=True)
class TableSpec:
    """Contract of one table under the lake root."""

    name: str  # path under the lake root, e.g. "silver/views"
    description: str
    columns: tuple[Column, ...]
    keys: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)
    # False: a job refuses to write it empty, or to read it empty as an input (--allow-empty)
    may_be_empty: bool = False

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name} has no column {name!r}")

    def ddl(self) -> str:
        """Spark DDL of the columns, e.g. ``"a string NOT NULL, b int"``."""
        return ", ".join(
            f"`{c.name}` {c.type}{'' if c.nullable else ' NOT NULL'}" for c in self.columns
        )

    def spark_schema(self):
        """The pyspark StructType of this table (imported lazily: schemas has no Spark dependency)."""
        from pyspark.sql.types import StructField, StructType

        return StructType(
            [
                StructField(c.name, parse_type(c.type), c.nullable, {"comment": c.doc})
                for c in self.columns
            ]
        )


_PRIMITIVES = {
    "string": "StringType",
    "int": "IntegerType",
    "bigint": "LongType",
    "float": "FloatType",
    "double": "DoubleType",
    "boolean": "BooleanType",
    "date": "DateType",
    "timestamp": "TimestampType",
    "binary": "BinaryType",
}


def _split_top_level(s: str) -> list[str]:
    """Split ``s`` on commas that are not inside <...>."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def parse_type(ddl: str):
    """Parse our DDL subset (primitives, array<>, map<>, struct<>) without a Spark session."""
    from pyspark.sql import types as T

    ddl = ddl.strip()
    lower = ddl.lower()
    if lower in _PRIMITIVES:
        return getattr(T, _PRIMITIVES[lower])()
    if lower.startswith("array<") and lower.endswith(">"):
        return T.ArrayType(parse_type(ddl[6:-1]), containsNull=True)
    if lower.startswith("map<") and lower.endswith(">"):
        key, value = _split_top_level(ddl[4:-1])
        return T.MapType(parse_type(key), parse_type(value), valueContainsNull=True)
    if lower.startswith("struct<") and lower.endswith(">"):
        fields = []
        for part in _split_top_level(ddl[7:-1]):
            name, _, type_ = part.partition(":")
            fields.append(T.StructField(name.strip(), parse_type(type_), True))
        return T.StructType(fields)
    raise ValueError(f"unsupported column type {ddl!r}")


def col(name: str, type_: str, doc: str = "", nullable: bool = True) -> Column:
    return Column(name, type_, nullable, doc)


def req(name: str, type_: str, doc: str = "") -> Column:
    """A NOT NULL column."""
    return Column(name, type_, False, doc)
