"""Ingest steps: raw export -> typed records -> bronze/publications, bronze/citations, quarantine.

Each step is a DataFrame -> DataFrame function. A record either becomes one bronze row or one
quarantine row with a reason; exact duplicate lines collapse into one row (counted).
"""

from __future__ import annotations

import json
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    FractionalType,
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lake import fs
from schemas.inputs import (
    CANONICAL_CITATION_FIELDS,
    CANONICAL_PATENT_FIELDS,
    CORRUPT_RECORD,
    GOOGLE_PATENTS_FIELDS,
    fields_ddl,
)
from spark_jobs.lib.languages import normalize_language

LOCALIZED_FIELDS = (
    "title_localized",
    "abstract_localized",
    "claims_localized",
    "description_localized",
)
VIEW_TEXT_FIELDS = ("abstract_localized", "claims_localized", "description_localized")
# Lines above this size are quarantined as record_too_large before any JSON parsing.
MAX_RECORD_BYTES = 32 * 1024 * 1024
CANONICAL_FOLDERS = ("patents", "citations")  # the canonical input's layout
QUARANTINED_PREFIX_CHARS = 65_536  # what quarantine keeps of such a line (source_file has it all)
# Search-report source codes; the other field of the type/category pair holds the letters.
CITATION_SOURCES = (
    "SEA",
    "ISR",
    "SUP",
    "CH2",
    "APP",
    "EXA",
    "OPP",
    "FOP",
    "TPO",
    "PRS",
    "ISA",
    "IPE",
    "EXT",
    "SER",
    "CIT",
    "115",
    "116",
)
RELEVANCE_LETTERS = "XYADEPLOT1"
MIN_YEAR, MAX_YEAR = 1790, 2100
# Quarantine reasons of whole files (prefixes before ':'); every other reason is one line.
FILE_REASONS = ("unreadable_file", "unsupported_encoding")
# Quarantine reasons of canonical citation lines: rows of no patent record (ingest's
# read = kept + duplicates + quarantined counts patent records).
CITATION_REASONS = ("citation_of_unknown_patent", "unparseable_citation")


def _has_text(text: Column) -> Column:
    """True when ``text`` holds a character other than a space (Spark's ``trim`` strips spaces
    only). The first character decides nearly every text, so a long text is neither copied
    nor counted as ``length(trim(text)) > 0`` would."""
    return (text != "") & ((F.substring(text, 1, 1) != " ") | (F.trim(text) != ""))


def _blank(c: Column) -> Column:
    """True for null or nothing but spaces (``_has_text``'s test: a long text is not copied)."""
    return c.isNull() | ~_has_text(c)


# --- reading ------------------------------------------------------------------------------


def read_lines(
    spark: SparkSession, files: list[str], report=None
) -> tuple[DataFrame, list[fs.FileProbe]]:
    """Non-blank lines of every readable JSON-lines file of ``files`` (plain, or compressed
    with the codec its name picks), and the probes of the files left out (``fs.probe_file``): a
    compressed file that does not decompress to its end (truncated, corrupt), whose bytes are
    not the compression its name announces, Parquet data not named ``*.parquet``, or whose
    byte-order mark declares UTF-16/32. The caller quarantines those (``file_quarantine``); the
    other files are read as usual. ``report`` hears how far the probes are
    (``fs.probe_each``)."""
    readable, left_out = _readable_and_left_out(
        fs.probe_each(lambda name: fs.probe_file(spark, name), files, report=report)
    )
    if readable:
        lines = spark.read.text(readable).select(
            "value", F.col("_metadata.file_path").alias("source_file")
        )
    else:
        lines = spark.createDataFrame([], "value string, source_file string")
    return lines.where(_has_text(F.col("value"))), left_out


def input_files(spark: SparkSession, path: str) -> list[str]:
    """Every file an input path names: a file, a glob, or a folder with the files of its
    subfolders (an export written as ``2024/part-*``); Spark skips names starting with ``_``
    or ``.`` (``_SUCCESS``, ``.crc``)."""
    return sorted(spark.read.option("recursiveFileLookup", "true").text(path).inputFiles())


def is_parquet(name: str) -> bool:
    """Whether an input file is read as Parquet (by its name; every other file as JSON lines)."""
    return name.lower().endswith(".parquet")


def read_input(
    spark: SparkSession,
    path: str,
    fields,
    left_out: list[fs.FileProbe],
    max_record_bytes: int,
    report=None,
) -> DataFrame:
    """The records of every file under ``path`` as ``parse_lines`` rows of ``fields``: JSON-lines
    files are probed and read line by line (``read_lines``: the size limit, UTF-8 check and
    mistyped-field names), files named ``*.parquet`` are probed by reading each whole
    (``read_parquet``); a folder may hold both. The files left out are appended to
    ``left_out`` for the file quarantine; ``report`` hears how far the probes are."""
    files = input_files(spark, path)
    parquet = [name for name in files if is_parquet(name)]
    json_lines = [name for name in files if not is_parquet(name)]
    frames = (
        [read_parquet(spark, parquet, fields, left_out, max_record_bytes, report)]
        if parquet
        else []
    )
    if json_lines or not frames:  # no file at all: an empty frame of the right shape
        lines, damaged = read_lines(spark, json_lines, report)
        left_out.extend(damaged)
        frames.append(parse_lines(lines, fields, max_record_bytes))
    return reduce(DataFrame.unionByName, frames)


def _readable_and_left_out(probes) -> tuple[list[str], list[fs.FileProbe]]:
    probes = list(probes)
    return [p.path for p in probes if p.readable], [p for p in probes if not p.readable]


# --- Parquet ------------------------------------------------------------------------------
# A Parquet file is read with its own types where they differ from the input schema's and
# converted by name (``conform``): struct fields by name, in any order, those the schema does
# not name never read (a BigQuery export's ``cpc.tree``, its other columns); a number or a
# boolean where a string belongs as its text, as the JSON-lines reader takes it; a date field
# (``*_date``, at any depth) stored as a date or a timestamp (its UTC date), as pandas and
# pyarrow write dates (an integer YYYYMMDD is a number); a field of another type that holds
# no value in the file is read as nulls: pyarrow and pandas store a column of only nulls (or
# only empty lists) with Parquet's null type, which Spark reads as ``int``. Any other field of
# another type fails the file's probe, naming the field.


def _has_value(column: Column, steps: tuple[str | None, ...], kind: DataType) -> Column:
    """Whether a row holds a value at ``steps`` below ``column`` (a field name, or None for an
    array's elements); an array at the end holds a value when one of its elements is set."""
    if not steps:
        if isinstance(kind, ArrayType):
            return F.exists(column, lambda value: value.isNotNull())
        return column.isNotNull()
    step, rest = steps[0], steps[1:]
    if step is None:
        return F.exists(column, lambda value: _has_value(value, rest, kind))
    return _has_value(column.getField(step), rest, kind)


def _read_type(stored: DataType, wanted: DataType, path: tuple, other: dict) -> DataType:
    """The type to read a field stored as ``stored`` with, to convert it to ``wanted``: the
    stored type, less the struct fields ``wanted`` does not name. A field whose stored type
    cannot be converted is added to ``other`` (its path: field names, None for array elements,
    to its stored and wanted types)."""
    if stored.simpleString() == wanted.simpleString():
        return stored
    if isinstance(stored, StructType) and isinstance(wanted, StructType):
        names = set(stored.fieldNames())
        kept = [
            StructField(
                f.name, _read_type(stored[f.name].dataType, f.dataType, (*path, f.name), other)
            )
            for f in wanted.fields
            if f.name in names
        ]
        if kept:
            return StructType(kept)
    elif isinstance(stored, ArrayType) and isinstance(wanted, ArrayType):
        return ArrayType(_read_type(stored.elementType, wanted.elementType, (*path, None), other))
    elif _converts(path, stored, wanted):
        return stored
    other[path] = (stored, wanted)
    return stored


def _converts(path: tuple, stored: DataType, wanted: DataType) -> bool:
    """Whether a field stored as the atomic ``stored`` converts to ``wanted`` as the JSON-lines
    reader would read it: a number or a boolean into a string field (its text: Spark's JSON
    reader takes any value but an array or object as a string), a date or a timestamp into a
    date field (``*_date``)."""
    if wanted.simpleString() != "string":
        return False
    if isinstance(stored, NumericType | BooleanType):
        return True
    name = next((step for step in reversed(path) if step is not None), "")
    return name.endswith("_date") and isinstance(
        stored, DateType | TimestampType | TimestampNTZType
    )


def _dotted(path: tuple) -> str:
    return ".".join(step for step in path if step is not None)


def conform(
    column: Column, stored: DataType, wanted: DataType, path: tuple, nulled: frozenset
) -> Column:
    """``column``, read as ``stored`` (``_read_type``), as ``wanted``: struct fields by name
    (those the file lacks are nulls), arrays element by element, a timestamp as its date, a date
    as ``YYYY-MM-DD``, a number or a boolean as its text (an integer date then checked as
    YYYYMMDD); the fields of ``nulled`` (of another type, holding no value) are nulls."""
    if path in nulled:
        return F.lit(None).cast(wanted)
    if stored.simpleString() == wanted.simpleString():
        return column
    if isinstance(wanted, StructType):
        names = set(stored.fieldNames())
        fields = [
            (
                conform(
                    column.getField(f.name),
                    stored[f.name].dataType,
                    f.dataType,
                    (*path, f.name),
                    nulled,
                )
                if f.name in names
                else F.lit(None).cast(f.dataType)
            ).alias(f.name)
            for f in wanted.fields
        ]
        return F.when(column.isNotNull(), F.struct(*fields))
    if isinstance(wanted, ArrayType):
        return F.transform(
            column,
            lambda value: conform(
                value, stored.elementType, wanted.elementType, (*path, None), nulled
            ),
        )
    if stored.simpleString().startswith("timestamp"):
        column = column.cast("date")
    if isinstance(stored, FractionalType) and wanted.simpleString() == "string":
        # a whole number stored as a float (pandas writes an integer column with a missing
        # value as float64) as its digits: "1.2345678E7" was a family id of no family
        return whole_number_text(column.cast("string"))
    return column.cast(wanted)


def parquet_read_schema(
    spark: SparkSession, name: str, wanted: StructType
) -> tuple[StructType, frozenset]:
    """The schema to read the Parquet file ``name`` with (``_read_type`` of each column of
    ``wanted`` it stores; the input's type for the others, read as nulls) and the fields of
    another type that hold no value (read as nulls). Raises ValueError naming a field of
    another type that holds values, or the file's columns when it lacks the first field of
    ``wanted`` (the record's id: a file of another table or with renamed columns)."""
    frame = spark.read.parquet(name)  # its schema: the file's footer, read once here
    stored = {f.name: f.dataType for f in frame.schema.fields}
    key = wanted.fields[0].name  # the record's id: without it no row could be kept or traced
    if key.lower() not in {n.lower() for n in stored}:
        held = ", ".join(sorted(stored)[:20]) + (", ..." if len(stored) > 20 else "")
        raise ValueError(f"no column {key}; the file's columns are {held}")
    other: dict[tuple, tuple[DataType, DataType]] = {}
    schema = StructType(
        [
            StructField(f.name, _read_type(stored[f.name], f.dataType, (f.name,), other))
            if f.name in stored
            else f
            for f in wanted.fields
        ]
    )
    if other:
        paths = list(other)
        held = frame.select(
            *[
                F.max(_has_value(F.col(p[0]), p[1:], other[p][0]).cast("int")).alias(f"v{i}")
                for i, p in enumerate(paths)
            ]
        ).first()
        mistyped = next((p for i, p in enumerate(paths) if held[f"v{i}"]), None)
        if mistyped is not None:
            kind, want = other[mistyped]
            raise ValueError(
                f"column {_dotted(mistyped)} holds {kind.simpleString()} values, "
                f"the input schema says {want.simpleString()}"
            )
    return schema, frozenset(other)


def read_parquet(
    spark: SparkSession,
    names: list[str],
    fields,
    left_out: list[fs.FileProbe],
    max_record_bytes: int = MAX_RECORD_BYTES,
    report=None,
) -> DataFrame:
    """The Parquet files ``names`` as ``parse_lines`` rows of ``fields``: ``raw`` is the record
    as JSON, ``too_large`` a record whose JSON is above ``max_record_bytes`` (quarantined as
    ``record_too_large`` like such a line, ``raw`` cut as there). Each file is probed by
    reading it once in full with its read schema (``parquet_read_schema``) before the job
    reads them together, grouped by that schema; a file that fails (truncated, a corrupt
    page, a mistyped field) is appended to ``left_out``; ``report`` hears how far the probes
    are."""
    wanted = input_schema(spark, fields)
    plans: dict[str, tuple[StructType, frozenset]] = {}

    def read_whole(name: str) -> None:
        plans[name] = parquet_read_schema(spark, name, wanted)
        spark.read.schema(plans[name][0]).parquet(name).write.format("noop").mode(
            "overwrite"
        ).save()

    readable, damaged = _readable_and_left_out(
        fs.probe_each(
            lambda name: fs.probe_by_reading(name, lambda: read_whole(name)), names, report=report
        )
    )
    left_out.extend(damaged)
    groups: dict[tuple[str, frozenset], tuple[StructType, frozenset, list[str]]] = {}
    for name in readable:
        schema, nulled = plans[name]
        groups.setdefault((schema.json(), nulled), (schema, nulled, []))[2].append(name)
    frames = [
        spark.read.schema(schema)
        .parquet(*group)
        .select(
            *[
                conform(
                    F.col(f.name), schema[f.name].dataType, f.dataType, (f.name,), nulled
                ).alias(f.name)
                for f in wanted.fields
            ],
            F.col("_metadata.file_path").alias("source_file"),
        )
        for schema, nulled, group in groups.values()
    ]
    frame = (
        reduce(DataFrame.unionByName, frames)
        if frames
        else spark.createDataFrame([], wanted).withColumn("source_file", F.lit(None).cast("string"))
    )
    columns = [F.col(f.name) for f in wanted.fields]
    # Parquet stores strings as bytes nobody checked: a text that is not UTF-8 would stop
    # curate's Python code, so such a record is quarantined as invalid_utf8, as a line is
    valid_utf8 = _valid_utf8(F.struct(*columns), wanted)
    # the JSON once per record (a second select: Spark does not repeat a costly expression)
    frame = frame.select(
        "source_file",
        *columns,
        F.to_json(F.struct(*columns)).alias("_raw"),
        valid_utf8.alias("_valid_utf8"),
    )
    too_large = F.octet_length("_raw") > F.lit(max_record_bytes)
    return frame.select(
        F.when(too_large, F.substring("_raw", 1, QUARANTINED_PREFIX_CHARS))
        .otherwise(F.col("_raw"))
        .alias("raw"),
        "source_file",
        *columns,
        F.lit(False).alias("corrupt"),
        F.lit(None).cast("string").alias("bad_field"),
        too_large.alias("too_large"),
        F.col("_valid_utf8").alias("valid_utf8"),
        F.octet_length("_raw").alias("record_bytes"),
    )


def _holds_string(data_type: DataType) -> bool:
    if isinstance(data_type, StructType):
        return any(_holds_string(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _holds_string(data_type.elementType)
    return isinstance(data_type, StringType)


def _valid_utf8(column: Column, data_type: DataType) -> Column:
    """True when every string in ``column`` (of a type that ``_holds_string``), nested ones
    too, is UTF-8; a null is."""
    if isinstance(data_type, StructType):
        return reduce(
            Column.__and__,
            [
                _valid_utf8(column.getField(f.name), f.dataType)
                for f in data_type.fields
                if _holds_string(f.dataType)
            ],
        )
    if isinstance(data_type, ArrayType):
        return F.coalesce(
            F.forall(column, lambda e: _valid_utf8(e, data_type.elementType)), F.lit(True)
        )
    return F.coalesce(F.is_valid_utf8(column), F.lit(True))


def input_schema(spark: SparkSession, fields) -> StructType:
    """The input schema ``fields`` (``(name, ddl, ...)``) as a StructType."""
    return spark.createDataFrame([], fields_ddl(fields)).schema


def file_reason(probe: fs.FileProbe) -> str:
    """The quarantine reason of a file left out of the read."""
    if probe.encoding is not None:
        return f"unsupported_encoding:{probe.encoding}"
    return "unreadable_file"


def file_quarantine(spark: SparkSession, probes: list[fs.FileProbe], ingested_at) -> DataFrame:
    """One quarantine row per file left out: the reason, the error and the lines read before it."""
    rows = [
        (
            file_reason(probe),
            None,
            json.dumps(
                {"error": probe.error, "encoding": probe.encoding, "lines_read": probe.lines_read},
                sort_keys=True,
            ),
            probe.path,
            ingested_at,
            None,
        )
        for probe in probes
    ]
    schema = (
        "reason string, record_id string, record string, source_file string, "
        "ingested_at timestamp, stage string"
    )
    return spark.createDataFrame(rows, schema)


def parse_google_patents(lines: DataFrame, max_record_bytes: int = MAX_RECORD_BYTES) -> DataFrame:
    """Parse export lines (``parse_lines`` with the export's fields)."""
    return parse_lines(lines, GOOGLE_PATENTS_FIELDS, max_record_bytes)


def parse_lines(lines: DataFrame, fields, max_record_bytes: int = MAX_RECORD_BYTES) -> DataFrame:
    """Parse JSON lines (``value``, ``source_file``) into ``fields`` (``(name, ddl, ...)``):
    the fields, ``raw``, ``source_file``, ``corrupt``, ``bad_field`` (the first top-level
    field whose value has the wrong JSON type), ``too_large`` (lines over
    ``max_record_bytes``: never parsed, kept truncated in ``raw``), ``valid_utf8`` (false for
    bytes that are not UTF-8: the bad bytes replaced by U+FFFD in ``raw``, never parsed) and
    ``record_bytes``. A string value may be as long as the line (Jackson's default limit is
    20 M characters: a longer description would have been called unparseable)."""
    too_large = F.octet_length("value") > F.lit(max_record_bytes)
    valid_utf8 = F.is_valid_utf8("value")
    text = F.when(~too_large & valid_utf8, F.col("value"))
    ddl = ", ".join(f"`{name}` {kind}" for name, kind, *_ in fields)
    long_strings = _long_strings(max_record_bytes)
    rec = F.from_json(
        text,
        f"{ddl}, `{CORRUPT_RECORD}` string",
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD, **long_strings},
    )
    parsed = lines.select(
        F.when(too_large, F.substring(F.make_valid_utf8("value"), 1, QUARANTINED_PREFIX_CHARS))
        .otherwise(F.make_valid_utf8("value"))
        .alias("raw"),
        "source_file",
        too_large.alias("too_large"),
        valid_utf8.alias("valid_utf8"),
        F.octet_length("value").alias("record_bytes"),
        rec.alias("rec"),
        F.when(F.col("rec").isNull() | F.col(f"rec.{CORRUPT_RECORD}").isNotNull(), text).alias(
            "_bad_text"
        ),
    )
    container = _container_in_string_field(F.col("rec"), F.col("raw"), fields)
    corrupt = F.col(f"rec.{CORRUPT_RECORD}").isNotNull() | container.isNotNull()
    return parsed.select(
        "raw",
        "source_file",
        *[_parsed_field(F.col(f"rec.{name}"), name, kind).alias(name) for name, kind, *_ in fields],
        (corrupt | _more_than_one_value(F.col("raw"), long_strings)).alias("corrupt"),
        F.coalesce(first_mistyped_field(F.col("_bad_text"), fields, long_strings), container).alias(
            "bad_field"
        ),
        "too_large",
        "valid_utf8",
        "record_bytes",
    )


def _long_strings(max_record_bytes: int) -> dict[str, str]:
    """The JSON reader's option for string values as long as a record may be (Jackson's
    default limit is 20 M characters), for every parse of a line."""
    return {"maxStringLen": str(max(max_record_bytes, 20_000_000))}


# A number the JSON reader puts into a string field as Java writes a double: 12345678.0 (what
# pandas writes for an integer column with a missing value) reads "1.2345678E7".
_FLOAT_TEXT = r"^-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?$"


def whole_number_text(text: Column) -> Column:
    """``text`` of a whole number written as a float ("12345678.0", "1.2345678E7") as its
    digits ("12345678"); any other text as it is. A family id so written matched no other
    member, and a YYYYMMDD date was quarantined as invalid."""
    number = text.try_cast("double")
    whole = (
        text.rlike(_FLOAT_TEXT)
        & ~text.rlike("^-?[0-9]+$")
        & (F.abs(number) < F.lit(1e15))  # exact in a double, NaN and infinity excluded
        & (number == F.floor(number))
    )
    return F.when(whole, number.cast("bigint").cast("string")).otherwise(text)


def _parsed_field(value: Column, name: str, kind: str) -> Column:
    """A parsed top-level field; a family id or a date given as a whole float as its digits."""
    if kind == "string" and (name == "family_id" or name.endswith("_date")):
        return whole_number_text(value)
    return value


def _more_than_one_value(line: Column, options: dict[str, str]) -> Column:
    """True for a line that holds more than one JSON value (``{...}{...}``, as two files
    joined without a final line break give; ``{...} {...}``; ``{...} text``). The parser
    reads the first value and ignores the rest, so the line passed for one record and the
    others were lost. Only a line that does not end its object at its end (its last 16
    characters are read), or that holds ``}{`` (blanks between allowed), is parsed again, as
    the elements of a JSON array: one element, or a single JSON value."""
    suspect = ~F.right(line, F.lit(16)).rlike(r"\}\s*$") | line.rlike(r"\}\s*\{")
    values = F.size(F.from_json(F.concat(F.lit("["), line, F.lit("]")), "array<string>", options))
    return F.coalesce(suspect & (F.coalesce(values, F.lit(-1)) != 1), F.lit(False))


def _container_in_string_field(rec: Column, raw: Column, fields) -> Column:
    """The first string field of ``fields`` given a JSON array or object (``"abstract":
    ["a", "b"]``) in the parsed record ``rec`` of line ``raw``, else null. Spark's parser
    fills a string field with the raw JSON of such a value, so the record would be kept with
    that JSON as its text; the value's own type is looked up (a variant parse of the line)
    only when the parsed string starts with ``[`` or ``{``, as a real abstract may
    (``[Problem] ...``)."""
    found = F.lit(None).cast("string")
    for name, kind, *_ in reversed(fields):
        if kind != "string":
            continue
        looks = F.substring(rec.getField(name), 1, 1).isin("[", "{")
        kind_of = F.schema_of_variant(F.variant_get(F.try_parse_json(raw), f"$.{name}", "variant"))
        found = F.when(looks & kind_of.rlike("^(ARRAY|OBJECT)"), F.lit(name)).otherwise(found)
    return found


def first_mistyped_field(
    text: Column, fields=GOOGLE_PATENTS_FIELDS, options: dict[str, str] | None = None
) -> Column:
    """For a JSON object that failed to parse: the first top-level field of ``fields``
    (``(name, ddl, ...)`` in order) whose value does not have the declared type (e.g. ``ipc``
    given as a string); null when the text is not a JSON object at all (then it is
    ``unparseable_json``)."""
    values = F.from_json(text, "map<string,string>", options or {})  # values as JSON text
    bad = F.lit(None).cast("string")
    for name, ddl, *_ in reversed(fields):
        if ddl == "string":  # Spark reads any JSON value into a string field: never mistyped
            continue
        value = values.getItem(name)
        wrapped = F.from_json(F.concat(F.lit('{"v":'), value, F.lit("}")), f"v {ddl}")
        mistyped = value.isNotNull() & wrapped.getField("v").isNull()
        bad = F.when(mistyped, F.lit(name)).otherwise(bad)
    return F.when(text.isNotNull() & values.isNotNull(), bad)


def layout_error(spark: SparkSession, path: str, fmt: str) -> str | None:
    """Why the folder ``path`` cannot be ``fmt`` input when it is laid out for the other format,
    else None. Without it Spark names a missing ``patents`` path, or the export reader finds no
    record (it reads no subfolder). A file, a glob or a missing path is left to Spark's reader,
    which names it."""
    names = [n for n in fs.list_names(spark, path) if not n.startswith(("_", "."))]
    if not names:
        return None
    if fmt == "canonical" and "patents" not in names:
        return (
            f"--format canonical reads {path}/patents/ and {path}/citations/, and {path} has no "
            f"patents/ folder: it holds {names[0]!r}"
            + (f" and {len(names) - 1} more" if len(names) > 1 else "")
            + " (a Google Patents export? pass --format google_patents)"
        )
    if fmt == "canonical" and "citations" not in names:
        return (
            f"--format canonical reads {path}/patents/ and {path}/citations/, and {path} has no "
            "citations/ folder (for a corpus without citations, create it empty)"
        )
    if fmt == "google_patents" and set(names) <= set(CANONICAL_FOLDERS):
        return (
            f"--format google_patents reads the export files in {path}, and it holds only the "
            f"canonical layout's folders ({', '.join(n + '/' for n in names)}): pass --format "
            "canonical"
        )
    return None


def patents_path(path: str, fmt: str) -> str:
    """Where the patent records of an input of format ``fmt`` are."""
    return f"{path}/patents" if fmt == "canonical" else path


def read_canonical(
    spark: SparkSession, path: str, max_record_bytes: int = MAX_RECORD_BYTES, report=None
) -> tuple[DataFrame, DataFrame, list[fs.FileProbe]]:
    """Canonical input (``path``/patents, ``path``/citations) in the record shape, the
    citation lines (``parse_lines`` rows), and the probes of the files left out (damaged or
    foreign, see ``read_lines``); ``report`` hears how far the probes are."""
    left_out: list[fs.FileProbe] = []
    patents = read_input(
        spark,
        patents_path(path, "canonical"),
        CANONICAL_PATENT_FIELDS,
        left_out,
        max_record_bytes,
        report,
    )

    def localized(column: str) -> Column:
        entry = F.struct(
            F.col(column).alias("text"),
            F.col("lang").alias("language"),
            F.lit(False).alias("truncated"),
        )
        return F.when(
            _blank(F.col(column)),
            F.array().cast("array<struct<text:string,language:string,truncated:boolean>>"),
        ).otherwise(F.array(entry))

    def classification(column: str) -> Column:
        return F.transform(
            F.coalesce(F.col(column), F.array().cast("array<string>")),
            lambda code, i: F.struct(
                code.alias("code"), (i == 0).alias("inventive"), (i == 0).alias("first")
            ),
        )

    records = patents.select(
        "raw",
        "source_file",
        *[
            F.col(n)
            for n in (
                "publication_number",
                "application_number",
                "country_code",
                "kind_code",
                "family_id",
                "publication_date",
                "filing_date",
                "priority_date",
            )
        ],
        localized("title").alias("title_localized"),
        localized("abstract").alias("abstract_localized"),
        localized("claims").alias("claims_localized"),
        localized("description").alias("description_localized"),
        classification("ipc").alias("ipc"),
        classification("cpc").alias("cpc"),
        F.lit(None)
        .cast(
            "array<struct<publication_number:string,application_number:string,"
            "npl_text:string,type:string,category:string,filing_date:string>>"
        )
        .alias("citation"),
        "corrupt",
        "bad_field",
        "too_large",
        "valid_utf8",
        "record_bytes",
    )
    citations = read_input(
        spark, f"{path}/citations", CANONICAL_CITATION_FIELDS, left_out, max_record_bytes, report
    )
    return records, citations, left_out


# --- dates and languages ---------------------------------------------------------------


def _date_digits(c: Column) -> Column:
    return F.regexp_replace(F.trim(c.cast("string")), "-", "")


def is_unknown_date(c: Column) -> Column:
    """True for null, empty or 0: the export's way of saying 'unknown'."""
    digits = _date_digits(c)
    return digits.isNull() | (digits == "") | (digits == "0")


def parse_date(c: Column) -> Column:
    """A date from YYYYMMDD (int or string) or YYYY-MM-DD; null when unknown or invalid."""
    digits = _date_digits(c)
    parsed = F.try_to_date(digits, "yyyyMMdd")
    plausible = digits.rlike("^[0-9]{8}$") & F.year(parsed).between(MIN_YEAR, MAX_YEAR)
    return F.when(~is_unknown_date(c) & plausible, parsed)


def is_invalid_date(c: Column) -> Column:
    """True when a date is given but is not a real calendar date (20251341, 20230230, ...)."""
    return ~is_unknown_date(c) & parse_date(c).isNull()


#: the raw language code of a validated entry, kept for the unknown-language reason and
#: dropped from bronze (``bronze_localized``)
_RAW_LANGUAGE = "raw_language"


def normalize_localized(arr: Column) -> Column:
    """Keep entries with text; normalize language codes (null when unknown, the code as given
    in ``raw_language``); truncated defaults to false."""
    return F.transform(
        F.filter(F.coalesce(arr, F.array()), lambda e: _has_text(e.text)),
        lambda e: F.struct(
            e.text.alias("text"),
            normalize_language(e.language).alias("language"),
            F.coalesce(e.truncated, F.lit(False)).alias("truncated"),
            e.language.alias(_RAW_LANGUAGE),
        ),
    )


def bronze_localized(arr: Column) -> Column:
    """A normalized array (``normalize_localized``) in bronze's shape: text, language,
    truncated."""
    return F.transform(arr, lambda e: F.struct(e.text, e.language, e.truncated))


def _shown_code(code: Column) -> Column:
    """A raw language code as a quarantine reason shows it: ``<null>``, ``<blank>`` (an
    empty reason, ``unknown_language:``, named nothing), else the code."""
    return (
        F.when(code.isNull(), F.lit("<null>")).when(_blank(code), F.lit("<blank>")).otherwise(code)
    )


def first_unknown_language(*normalized: Column) -> Column:
    """The raw code of the first text entry of the normalized arrays whose language is unknown
    (``<null>`` when it has none, ``<blank>`` when it is blank; null when every language is
    known)."""
    firsts = []
    for arr in normalized:
        bad = F.filter(arr, lambda e: e.language.isNull())
        firsts.append(
            F.when(
                F.size(bad) > 0,
                _shown_code(F.try_element_at(bad, F.lit(1)).getField(_RAW_LANGUAGE)),
            )
        )
    return F.coalesce(*firsts)


# --- validation -----------------------------------------------------------------------------


def quarantine_reason(records: DataFrame) -> Column:
    """The first rule a record breaks, or null for a valid record; its text fields are
    normalized (``normalize_localized``)."""
    unknown_language = first_unknown_language(*[F.col(c) for c in LOCALIZED_FIELDS])
    has_text = F.lit(False)
    for c in VIEW_TEXT_FIELDS:
        has_text = has_text | (F.size(c) > 0)
    published = parse_date(F.col("publication_date"))
    filed = parse_date(F.col("filing_date"))
    return (
        F.when(F.col("too_large"), F.lit("record_too_large"))
        .when(~F.col("valid_utf8"), F.lit("invalid_utf8"))
        .when(
            F.col("corrupt") & F.col("bad_field").isNotNull(),
            F.concat(F.lit("invalid_field:"), "bad_field"),
        )
        .when(F.col("corrupt"), F.lit("unparseable_json"))
        .when(_blank(F.col("publication_number")), F.lit("missing_publication_number"))
        .when(
            _blank(F.col("family_id")) | F.trim("family_id").isin("0", "-1"),
            F.lit("missing_family_id"),
        )
        .when(published.isNull(), F.lit("invalid_date:publication_date"))
        .when(is_invalid_date(F.col("filing_date")), F.lit("invalid_date:filing_date"))
        .when(is_invalid_date(F.col("priority_date")), F.lit("invalid_date:priority_date"))
        .when(
            filed.isNotNull() & (published < filed),
            F.lit("impossible_dates:published_before_filing"),
        )
        .when(unknown_language.isNotNull(), F.concat(F.lit("unknown_language:"), unknown_language))
        .when(~has_text, F.lit("no_text"))
    )


def _content(name: str, kind: str) -> Column:
    """Field ``name`` (of ``kind``, after ``normalize_localized``) as a record's identity
    reads it: what bronze keeps of it, so that two copies of one record written differently
    by two exports (a date 20210101 or "2021-01-01", 0 or null for unknown; an empty list or
    none; truncated false or unsaid) are one record, not a conflict of both."""
    column = F.col(name)
    if name.endswith("_date"):
        return parse_date(column)
    if name in LOCALIZED_FIELDS:
        return bronze_localized(column)
    if kind.startswith("array<"):
        return F.when(F.size(column) > 0, column)
    return column


def with_validation(records: DataFrame) -> DataFrame:
    """Add ``record_hash`` (identity of the content bronze keeps, :func:`_content`) and
    ``reason`` (null = valid), and normalize the text fields (``normalize_localized``) once,
    for the rules and for bronze: each text's blank test is read once per record."""
    normalized = records.withColumns({c: normalize_localized(F.col(c)) for c in LOCALIZED_FIELDS})
    content = F.to_json(
        F.struct(*[_content(name, kind).alias(name) for name, kind in GOOGLE_PATENTS_FIELDS])
    )
    hashed = normalized.withColumn("record_hash", F.sha2(content, 256))
    return hashed.withColumn("reason", quarantine_reason(hashed))


def split_duplicates(valid: DataFrame) -> DataFrame:
    """Mark id conflicts and exact duplicates among valid records.

    Adds ``duplicate``: 'conflict' when one publication_number has records with different
    content (all of them go to quarantine), 'exact' for the 2nd+ copy of identical content
    (dropped, counted), null for the row to keep.

    Only the records of an id seen more than once are ranked; the ids are counted on a narrow
    column and broadcast, so the full records (texts, raw lines) are never shuffled.
    """
    keyed = valid.withColumn("_pn", F.trim("publication_number"))
    repeated = F.broadcast(keyed.groupBy("_pn").count().where(F.col("count") > 1).select("_pn"))
    by_id = Window.partitionBy("_pn")
    ordered = by_id.orderBy("record_hash", "source_file", "raw")
    ranked = (
        keyed.join(repeated, "_pn", "left_semi")
        .withColumn("_n_contents", F.size(F.collect_set("record_hash").over(by_id)))
        .withColumn("_copy", F.row_number().over(ordered))
        .withColumn(
            "duplicate",
            F.when(F.col("_n_contents") > 1, F.lit("conflict")).when(
                F.col("_copy") > 1, F.lit("exact")
            ),
        )
        .drop("_n_contents", "_copy")
    )
    single = keyed.join(repeated, "_pn", "left_anti").withColumn(
        "duplicate", F.lit(None).cast("string")
    )
    return single.unionByName(ranked).drop("_pn")


def to_bronze_publications(valid: DataFrame, source_format: str, ingested_at) -> DataFrame:
    """Typed bronze rows from valid, de-duplicated records."""

    def classification(c: str) -> Column:
        # codes trimmed of every blank (tabs too) here, once: each reader takes a prefix
        trimmed = F.transform(
            F.coalesce(F.col(c), F.array()),
            lambda e: e.withField("code", F.regexp_replace(e.code, r"(?U)^\s+|\s+$", "")),
        )
        return F.filter(trimmed, lambda e: ~_blank(e.code))

    return valid.select(
        F.trim("publication_number").alias("publication_number"),
        F.trim("application_number").alias("application_number"),
        F.upper(F.trim("country_code")).alias("country_code"),
        F.trim("kind_code").alias("kind_code"),
        F.trim("family_id").alias("family_id"),
        parse_date(F.col("publication_date")).alias("publication_date"),
        parse_date(F.col("filing_date")).alias("filing_date"),
        parse_date(F.col("priority_date")).alias("priority_date"),
        *[bronze_localized(F.col(c)).alias(c) for c in LOCALIZED_FIELDS],
        classification("ipc").alias("ipc"),
        classification("cpc").alias("cpc"),
        F.lit(source_format).alias("source_format"),
        "source_file",
        "record_hash",
        F.lit(ingested_at).cast("timestamp").alias("ingested_at"),
    )


def why_nothing_kept(validated: DataFrame, files: list[str]) -> str:
    """Why no record of ``validated`` (``with_validation``'s rows, read from ``files``) is
    kept, for the error of a run that would write an empty bronze/publications: no file, only
    blank lines, or the reasons and their counts, with a hint when the lines are pieces of one
    JSON document rather than one record per line."""
    if not files:
        return "the input holds no file (names starting with _ or . are skipped)"
    reasons = (
        validated.groupBy(F.coalesce("reason", F.lit("duplicate_id_conflict")).alias("r"))
        .count()
        .orderBy(F.desc("count"), "r")
        .collect()
    )
    if not reasons:
        empty = (
            "blank lines or Parquet files without rows"
            if any(map(is_parquet, files))
            else "blank lines"
        )
        return f"the input's {len(files):,} file(s) hold no record, only {empty}"
    told = ", ".join(f"{row['r']}: {row['count']:,}" for row in reasons[:5])
    text = f"no record is valid: {sum(row['count'] for row in reasons):,} rejected ({told})"
    pieces = validated.where(F.trim("raw").isin("[", "{", "]", "}", "},", "],")).limit(1)
    if reasons[0]["r"] == "unparseable_json" and not pieces.isEmpty():
        text += (
            "; the lines look like one pretty-printed JSON document or array: the input must "
            "be JSON lines, one record per line (e.g. `jq -c '.[]' in.json > in.jsonl`)"
        )
    return text


def to_quarantine(rejected: DataFrame, ingested_at) -> DataFrame:
    """Quarantine rows (stage is set by the writer) from records carrying a ``reason``."""
    return rejected.select(
        "reason",
        F.when(~_blank(F.col("publication_number")), F.trim("publication_number")).alias(
            "record_id"
        ),
        F.col("raw").alias("record"),
        "source_file",
        F.lit(ingested_at).cast("timestamp").alias("ingested_at"),
        F.lit(None).cast("string").alias("stage"),
    )


# --- citations --------------------------------------------------------------------------------


def _compact_letters(c: Column) -> Column:
    return F.regexp_replace(F.upper(F.trim(c)), r"[\s,;/|+&.-]", "")


def _is_source(c: Column) -> Column:
    return F.coalesce(F.upper(F.trim(c)).isin(*CITATION_SOURCES), F.lit(False))


def _is_letters(c: Column) -> Column:
    return ~_is_source(c) & F.coalesce(
        _compact_letters(c).rlike(f"^[{RELEVANCE_LETTERS}]+$"), F.lit(False)
    )


def citation_category(type_: Column, category: Column) -> Column:
    """Relevance letters from whichever of type/category holds them: upper, unique, sorted."""
    raw = F.coalesce(
        F.when(_is_letters(category), _compact_letters(category)),
        F.when(_is_letters(type_), _compact_letters(type_)),
    )
    letters = F.array_sort(F.array_distinct(F.filter(F.split(raw, ""), lambda x: x != "")))
    return F.when(raw.isNotNull(), F.array_join(letters, ""))


def citation_source(type_: Column, category: Column) -> Column:
    """The search-report source code from whichever of type/category holds it."""

    def other(c: Column) -> Column:
        return F.when(~_blank(c) & ~_is_letters(c), F.upper(F.trim(c)))

    return F.coalesce(
        F.when(_is_source(type_), F.upper(F.trim(type_))),
        F.when(_is_source(category), F.upper(F.trim(category))),
        other(type_),
        other(category),
    )


def _citation_columns(
    citing: Column,
    index: Column,
    cited: Column,
    application: Column,
    npl: Column,
    type_: Column,
    category: Column,
) -> list[Column]:
    letters = citation_category(type_, category)
    has = lambda ch: F.coalesce(F.instr(letters, ch) > 0, F.lit(False))  # noqa: E731
    return [
        citing.alias("citing"),
        index.cast("int").alias("citation_index"),
        F.when(~_blank(cited), F.trim(cited)).alias("cited"),
        F.when(~_blank(application), F.trim(application)).alias("cited_application"),
        F.when(~_blank(npl), F.trim(npl)).alias("npl_text"),
        letters.alias("category"),
        citation_source(type_, category).alias("source"),
        has("X").alias("is_x"),
        has("Y").alias("is_y"),
        has("A").alias("is_a"),
    ]


def explode_citations(records: DataFrame) -> DataFrame:
    """One row per non-null entry of the records' ``citation`` arrays (unresolved); null
    entries carry nothing to keep and are counted by ``duplicate_counts``."""
    exploded = records.select(
        F.trim("publication_number").alias("_citing"), F.posexplode("citation").alias("_i", "c")
    ).where(F.col("c").isNotNull())
    c = F.col("c")
    return exploded.select(
        *_citation_columns(
            F.col("_citing"),
            F.col("_i"),
            c.publication_number,
            c.application_number,
            c.npl_text,
            c.type,
            c.category,
        )
    )


def duplicate_counts(checked: DataFrame) -> tuple[int, int]:
    """Of ``split_duplicates`` rows, in one pass: how many are exact duplicates (dropped,
    counted), and how many entries of the kept records' ``citation`` arrays are null (they
    carry nothing to keep; dropped, counted)."""
    kept = F.col("duplicate").isNull()
    row = checked.agg(
        F.count_if(F.col("duplicate") == "exact").alias("exact"),
        F.sum(F.when(kept, F.size(F.filter("citation", lambda c: c.isNull())))).alias("null"),
    ).first()
    return int(row["exact"]), int(row["null"] or 0)


def canonical_citations(citations: DataFrame) -> DataFrame:
    """Canonical citation rows in bronze shape (unresolved); index by a stable order."""
    order = Window.partitionBy("_citing").orderBy("cited", "category", "source", "npl_text")
    keyed = citations.withColumn("_citing", F.trim("citing"))
    return keyed.select(
        *_citation_columns(
            F.col("_citing"),
            F.row_number().over(order) - 1,
            F.col("cited"),
            F.lit(None).cast("string"),
            F.col("npl_text"),
            F.col("source"),
            F.col("category"),
        )
    )


def resolve_citations(citations: DataFrame, publications: DataFrame) -> DataFrame:
    """Mark citations whose cited publication is in the corpus and attach its family."""
    corpus = publications.select(
        F.col("publication_number").alias("cited"), F.col("family_id").alias("cited_family_id")
    )
    joined = citations.join(corpus, on="cited", how="left")
    return joined.withColumn("resolved", F.col("cited_family_id").isNotNull())
