"""One Great Expectations suite per table. ``critical`` expectations stop the pipeline."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime

import great_expectations as gx

from schemas import TABLES
from schemas.defaults import CLAIM_RELATIONS, RECIPES, SIGNALS, STAGE2_DROP_REASONS, VIEWS
from spark_jobs.lib.languages import ISO_639_1
from spark_jobs.lib.pairs import PAIR_TYPES, SIGNAL
from spark_jobs.lib.pairs import RECIPES as PAIR_RECIPES
from spark_jobs.lib.texts import VISIBLE_CHARACTER

LANGS = sorted(ISO_639_1)
# each pair type's signal (one per type across the recipes)
_PAIR_SIGNAL = {t: SIGNAL[r[2]] for types in PAIR_RECIPES.values() for t, r in types.items()}
EARLIEST, LATEST = "1790-01-01", "2100-12-31"
# texts.visible's character class as a Java regular expression in a Spark SQL literal
# ((?U): \s is every Unicode blank, as in Python)
_VISIBLE_SQL = ("(?U)" + VISIBLE_CHARACTER).replace("\\", "\\\\").replace("'", "\\'")
STAGES = ["ingest", "curate", "split", "build_pairs", "build_triplets"]


def _c(expectation):
    expectation.meta = {**(expectation.meta or {}), "critical": True}
    return expectation


def _w(expectation):
    expectation.meta = {**(expectation.meta or {}), "critical": False}
    return expectation


def _key(*columns: str):
    if len(columns) == 1:
        return [
            _c(gx.expectations.ExpectColumnValuesToNotBeNull(column=columns[0])),
            _c(gx.expectations.ExpectColumnValuesToBeUnique(column=columns[0])),
        ]
    return [_c(gx.expectations.ExpectColumnValuesToNotBeNull(column=c)) for c in columns] + [
        _c(gx.expectations.ExpectCompoundColumnsToBeUnique(column_list=list(columns)))
    ]


def _not_empty():
    return _c(gx.expectations.ExpectTableRowCountToBeBetween(min_value=1))


def _dates(column: str, required: bool):
    out = [
        _c(
            gx.expectations.ExpectColumnValuesToBeBetween(
                column=column, min_value=EARLIEST, max_value=LATEST
            )
        )
    ]
    if column == "publication_date":  # nothing can be published in the future
        today = datetime.now(UTC).date().isoformat()
        out.append(
            _c(gx.expectations.ExpectColumnValuesToBeBetween(column=column, max_value=today))
        )
    if required:
        out.append(_c(gx.expectations.ExpectColumnValuesToNotBeNull(column=column)))
    return out


def _filed_before_published():
    return _c(
        gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="publication_date",
            column_B="filing_date",
            or_equal=True,
            ignore_row_if="either_value_is_missing",
        )
    )


def bronze_publications():
    return [
        _not_empty(),
        *_key("publication_number"),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="family_id")),
        *_dates("publication_date", True),
        *_dates("filing_date", False),
        *_dates("priority_date", False),
        _filed_before_published(),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="record_hash")),
        _w(
            gx.expectations.ExpectColumnValuesToMatchRegex(
                column="country_code", regex=r"^[A-Z]{2}$"
            )
        ),
    ]


def bronze_citations():
    return [
        *_key("citing", "citation_index"),
        _c(
            gx.expectations.ExpectColumnValuesToMatchRegex(
                column="category", regex=r"^[XYADEPLOT1]+$"
            )
        ),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="resolved")),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="is_x")),
        _rows(
            "category letters are sorted and is_x, is_y, is_a say which it holds",
            "category <> array_join(array_sort(split(category, '')), '') OR "
            + " OR ".join(
                f"is_{letter.lower()} <> coalesce(instr(category, '{letter}') > 0, false)"
                for letter in "XYA"
            ),
        ),
        _rows(
            "a citation is resolved exactly when its cited publication is in the corpus",
            "resolved <> coalesce(cited IN "
            "(SELECT publication_number FROM dq_bronze_publications), false)",
        ),
    ]


def quarantine():
    return [
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column=c))
        for c in ("stage", "reason", "record")
    ] + [_c(gx.expectations.ExpectColumnValuesToBeInSet(column="stage", value_set=STAGES))]


def silver_patents():
    return [
        _not_empty(),
        *_key("publication_number"),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="family_id")),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="languages")),
        _c(gx.expectations.ExpectColumnValuesToBeInSet(column="primary_lang", value_set=LANGS)),
        *_dates("publication_date", True),
        *_dates("filing_date", False),
        _filed_before_published(),
        _w(
            gx.expectations.ExpectColumnValuesToBeInSet(
                column="ipc_section", value_set=list("ABCDEFGH")
            )
        ),
        _w(gx.expectations.ExpectColumnValuesToNotBeNull(column="ipc_section", mostly=0.95)),
    ]


def silver_families():
    return [
        _not_empty(),
        *_key("family_id"),
        _c(gx.expectations.ExpectColumnValuesToBeBetween(column="n_members", min_value=1)),
    ]


def silver_views():
    return [
        _not_empty(),
        *_key("publication_number", "lang", "view"),
        _c(gx.expectations.ExpectColumnValuesToBeInSet(column="view", value_set=list(VIEWS))),
        _c(gx.expectations.ExpectColumnValuesToBeInSet(column="lang", value_set=LANGS)),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="text")),
        _c(gx.expectations.ExpectColumnValuesToBeBetween(column="n_chars", min_value=1)),
        _c(
            gx.expectations.ExpectColumnValuesToMatchRegex(
                column="text_sha256", regex="^[0-9a-f]{64}$"
            )
        ),
        _rows("text_sha256 is the SHA-256 of text", "text_sha256 <> sha2(text, 256)"),
        _rows(
            "a text holds a visible character and n_chars counts it",
            f"NOT text RLIKE '{_VISIBLE_SQL}' OR n_chars != char_length(text)",
        ),
    ]


def silver_claims():
    return [
        _not_empty(),
        *_key("publication_number", "lang", "claim_number"),
        _c(gx.expectations.ExpectColumnValuesToBeBetween(column="claim_number", min_value=1)),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="text")),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="independent")),
        _rows(
            "a claim depends on earlier claims only",
            "exists(depends_on, d -> d IS NULL OR d < 1 OR d >= claim_number)",
        ),
    ]


_CLAIM_KEYS = "SELECT publication_number, lang, claim_number FROM dq_silver_claims"


def silver_claim_graph():
    return [
        *_key("publication_number", "lang", "src_claim", "dst_claim", "relation"),
        _c(
            gx.expectations.ExpectColumnValuesToBeInSet(
                column="relation", value_set=list(CLAIM_RELATIONS)
            )
        ),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="evidence")),
        _c(
            gx.expectations.ExpectColumnValuesToBeBetween(column="weight", min_value=0, max_value=1)
        ),
        _rows("no self-loop", "src_claim = dst_claim"),
        _rows("an edge points to an earlier claim", "dst_claim >= src_claim"),
        _rows("a legal edge has weight 1", "relation = 'legal' AND weight != 1.0"),
        _rows(
            "both claims of an edge exist in silver/claims",
            f"(publication_number, lang, src_claim) NOT IN ({_CLAIM_KEYS}) "
            f"OR (publication_number, lang, dst_claim) NOT IN ({_CLAIM_KEYS})",
        ),
        _rows(
            "a legal edge is a dependency of silver/claims",
            "relation = 'legal' AND (publication_number, lang, src_claim, dst_claim) NOT IN "
            "(SELECT publication_number, lang, claim_number, d FROM dq_silver_claims "
            "LATERAL VIEW explode(depends_on) x AS d WHERE d IS NOT NULL)",
        ),
    ]


def silver_eval_queries():
    return [
        *_key("publication_number"),
        _c(gx.expectations.ExpectColumnValuesToNotBeNull(column="family_id")),
        _c(gx.expectations.ExpectColumnValuesToBeInSet(column="lang", value_set=LANGS)),
        _c(gx.expectations.ExpectColumnValuesToBeBetween(column="n_x_cited", min_value=1)),
        *_dates("filing_date", True),
        # every leakage check below compares against silver/excluded_families: it must hold
        # every query's family
        _rows(
            "every query family is excluded from training",
            f"family_id NOT IN ({_EXCLUDED_FAMILIES})",
        ),
        _rows("n_x_cited counts x_cited", "n_x_cited <> size(x_cited)"),
        _rows(
            "no X citation of the query's own family",
            "publication_number IN (SELECT e.publication_number FROM (SELECT publication_number, "
            "family_id, c FROM dq_silver_eval_queries LATERAL VIEW explode(x_cited) x AS c) e "
            "JOIN dq_silver_patents p ON p.publication_number = e.c "
            "WHERE p.family_id = e.family_id)",
        ),
    ]


def silver_excluded_families():
    return [*_key("family_id")]


# Cross-table checks run as SQL over the batch and the lake tables, which the runner
# registers as temporary views named dq_<path> (silver/patents -> dq_silver_patents).
_EXCLUDED_IDS = (
    "SELECT p.publication_number FROM dq_silver_patents p "
    "JOIN dq_silver_excluded_families e ON p.family_id = e.family_id"
)
_EXCLUDED_FAMILIES = "SELECT family_id FROM dq_silver_excluded_families"
# Spark allows no subquery inside a lambda: compare arrays with a scalar array subquery.
_EXCLUDED_ID_ARRAY = (
    "SELECT coalesce(collect_list(p.publication_number), array()) FROM dq_silver_patents p "
    "JOIN dq_silver_excluded_families e ON p.family_id = e.family_id"
)


def _rows(description: str, where: str):
    """Critical: no row of the batch may match ``where``."""
    return _c(
        gx.expectations.UnexpectedRowsExpectation(
            unexpected_rows_query=f"SELECT * FROM {{batch}} WHERE {where}", description=description
        )
    )


# a taxonomy pair's two patents share an IPC subclass (the first four characters of a code)
_SUBCLASSES = (
    "SELECT publication_number, upper(substr(code, 1, 4)) AS subclass "
    "FROM dq_silver_patents LATERAL VIEW explode(ipc_codes) c AS code"
)
_SHARED_SUBCLASS = (
    f"SELECT a.publication_number AS a, b.publication_number AS b FROM ({_SUBCLASSES}) a "
    f"JOIN ({_SUBCLASSES}) b ON a.subclass = b.subclass"
)
# a citation pair is an X, Y or A citation resolved in the corpus, in either direction
_CITED = (
    "SELECT citing AS a, cited AS b FROM dq_bronze_citations WHERE resolved AND (is_x OR is_y "
    "OR is_a) UNION ALL SELECT cited AS a, citing AS b FROM dq_bronze_citations WHERE resolved "
    "AND (is_x OR is_y OR is_a)"
)


def gold_stage1_pairs():
    return [
        _not_empty(),
        *_key("recipe", "pair_type", "anchor_id", "anchor_lang", "positive_id", "positive_lang"),
        _c(
            gx.expectations.ExpectColumnValuesToBeInSet(
                column="pair_type", value_set=list(PAIR_TYPES)
            )
        ),
        _c(gx.expectations.ExpectColumnValuesToBeInSet(column="signal", value_set=list(SIGNALS))),
        _c(
            gx.expectations.ExpectColumnValuesToBeInSet(column="anchor_view", value_set=list(VIEWS))
        ),
        _c(
            gx.expectations.ExpectColumnValuesToBeInSet(
                column="positive_view", value_set=list(VIEWS)
            )
        ),
        _rows(
            "a pair type carries its signal",
            "NOT (signal <=> CASE pair_type "
            + " ".join(f"WHEN '{t}' THEN '{s}'" for t, s in sorted(_PAIR_SIGNAL.items()))
            + " END)",
        ),
        _rows(
            "a recipe is a known recipe or its matched control",
            "NOT (" + " OR ".join(f"recipe RLIKE '^{r}(-matched-.+)?$'" for r in RECIPES) + ")",
        ),
        _rows(
            "a pair joins two different views",
            "anchor_id = positive_id AND anchor_lang = positive_lang "
            "AND anchor_view = positive_view",
        ),
        _rows(
            "a pair joins two different texts",
            "EXISTS (SELECT 1 FROM dq_silver_views a JOIN dq_silver_views b "
            "ON a.text_sha256 = b.text_sha256 WHERE a.publication_number = anchor_id "
            "AND a.lang = anchor_lang AND a.view = anchor_view AND b.publication_number = "
            "positive_id AND b.lang = positive_lang AND b.view = positive_view)",
        ),
        _rows(
            "no self-pair: taxonomy and citation pairs join two patents",
            "signal IN ('taxonomy', 'citation') AND anchor_id = positive_id",
        ),
        _rows(
            "views of one patent or family stay in one family",
            "signal IN ('cross_section', 'cross_language') AND family_id != positive_family_id",
        ),
        _rows(
            "no same-family taxonomy or citation pair",
            "signal IN ('taxonomy', 'citation') AND family_id = positive_family_id",
        ),
        _rows(
            "a taxonomy pair shares an IPC subclass",
            "signal = 'taxonomy' AND NOT EXISTS (SELECT 1 FROM "
            f"({_SHARED_SUBCLASS}) s WHERE s.a = anchor_id AND s.b = positive_id)",
        ),
        _rows(
            "a citation pair is a resolved X, Y or A citation",
            f"signal = 'citation' AND NOT EXISTS (SELECT 1 FROM ({_CITED}) c "
            "WHERE c.a = anchor_id AND c.b = positive_id)",
        ),
        _rows(
            "no evaluation family in Stage I pairs",
            f"family_id IN ({_EXCLUDED_FAMILIES}) OR positive_family_id IN ({_EXCLUDED_FAMILIES}) "
            f"OR anchor_id IN ({_EXCLUDED_IDS}) OR positive_id IN ({_EXCLUDED_IDS})",
        ),
    ]


def gold_stage1_stats():
    return [
        _not_empty(),
        *_key("recipe", "pair_type", "anchor_lang", "positive_lang"),
        _c(gx.expectations.ExpectColumnValuesToBeInSet(column="signal", value_set=list(SIGNALS))),
        _c(gx.expectations.ExpectColumnValuesToBeBetween(column="n_pairs", min_value=1)),
    ]


def gold_stage2_candidates():
    return [
        _not_empty(),
        *_key("query_id", "query_view"),
        _c(gx.expectations.ExpectColumnValuesToBeBetween(column="n_available", min_value=1)),
        _rows(
            "one id, dense score, BM25 rank and BM25 score per candidate",
            "size(cand_ids) <> n_available OR size(dense_scores) <> n_available "
            "OR size(bm25_ranks) <> n_available OR size(bm25_scores) <> n_available",
        ),
        _rows(
            "candidates are unique per query view", "size(array_distinct(cand_ids)) <> n_available"
        ),
        _rows(
            "every candidate has a dense score; BM25 ranks start at 1",
            "exists(dense_scores, s -> s IS NULL OR isnan(s)) OR exists(bm25_ranks, r -> r < 1)",
        ),
        _rows(
            "no evaluation family among queries and candidates",
            f"query_id IN ({_EXCLUDED_IDS}) OR arrays_overlap(cand_ids, ({_EXCLUDED_ID_ARRAY}))",
        ),
    ]


_ORIGINS = "('HH','HM','HL','MH','MM','ML','LH','LM','LL','A')"


def _examples(validation: bool):
    other = "dq_gold_stage2_examples" if validation else "dq_gold_stage2_validation"
    own = "dq_gold_stage2_validation" if validation else "dq_gold_stage2_examples"
    checks = [
        *_key("query_id", "query_view", "positive_id"),
        _rows(
            "exactly 8 negatives, each with a language and an origin",
            "size(negative_ids) <> 8 OR size(negative_langs) <> 8 OR size(negative_origin) <> 8 "
            "OR exists(negative_ids, n -> n IS NULL) OR exists(negative_langs, n -> n IS NULL)",
        ),
        _rows(
            "negative origins are strata or A",
            f"exists(negative_origin, o -> o IS NULL OR NOT o IN {_ORIGINS})",
        ),
        _rows(
            "no negative is the positive or the query, nor repeated",
            "array_contains(negative_ids, positive_id) OR array_contains(negative_ids, query_id) "
            "OR size(array_distinct(negative_ids)) <> size(negative_ids)",
        ),
        _rows(
            "no negative of the query's or the positive's family",
            "(query_id, query_view, positive_id) IN (SELECT e.query_id, e.query_view, "
            "e.positive_id FROM (SELECT query_id, query_view, positive_id, query_family_id, "
            f"positive_family_id, n FROM {own} LATERAL VIEW explode(negative_ids) x AS n) e "
            "JOIN dq_silver_patents p ON p.publication_number = e.n "
            "WHERE p.family_id IN (e.query_family_id, e.positive_family_id))",
        ),
        _rows(
            "no evaluation family in Stage II examples",
            f"query_family_id IN ({_EXCLUDED_FAMILIES}) OR positive_family_id IN ({_EXCLUDED_FAMILIES}) "
            f"OR query_id IN ({_EXCLUDED_IDS}) OR positive_id IN ({_EXCLUDED_IDS}) "
            f"OR arrays_overlap(negative_ids, ({_EXCLUDED_ID_ARRAY}))",
        ),
        _rows(
            "query_family_id and positive_family_id are their patents' families",
            "(query_id, query_family_id) NOT IN (SELECT publication_number, family_id FROM "
            "dq_silver_patents) OR (positive_id, positive_family_id) NOT IN "
            "(SELECT publication_number, family_id FROM dq_silver_patents)",
        ),
        _rows(
            "validation and training share no labelled family",
            f"query_family_id IN (SELECT query_family_id FROM {other} UNION SELECT positive_family_id FROM {other}) "
            f"OR positive_family_id IN (SELECT query_family_id FROM {other} UNION SELECT positive_family_id FROM {other})",
        ),
    ]
    return checks if validation else [_not_empty(), *checks]


def index_embeddings():
    return [
        _not_empty(),
        *_key("encoder", "kind", "id"),
        _c(gx.expectations.ExpectColumnValuesToBeInSet(column="kind", value_set=["tac", "query"])),
        _c(gx.expectations.ExpectColumnValuesToBeInSet(column="lang", value_set=LANGS)),
        _rows(
            "an embedding is finite and L2-normalised",
            "exists(embedding, x -> x IS NULL OR isnan(x)) OR abs(sqrt(aggregate(embedding, "
            "0D, (total, x) -> total + x * x)) - 1) > 1e-3",
        ),
        _rows(
            "one dimension per encoder",
            "(encoder, size(embedding)) NOT IN (SELECT encoder, min(size(embedding)) "
            "FROM dq_index_embeddings GROUP BY encoder)",
        ),
    ]


def gold_stage2_dropped():
    return [
        _c(
            gx.expectations.ExpectColumnValuesToBeInSet(
                column="reason",
                value_set=list(STAGE2_DROP_REASONS),
            )
        )
    ]


SUITES: dict[str, Callable[[], list]] = {
    "bronze/publications": bronze_publications,
    "bronze/citations": bronze_citations,
    "quarantine": quarantine,
    "silver/patents": silver_patents,
    "silver/families": silver_families,
    "silver/views": silver_views,
    "silver/claims": silver_claims,
    "silver/claim_graph": silver_claim_graph,
    "silver/eval_queries": silver_eval_queries,
    "silver/excluded_families": silver_excluded_families,
    "gold/stage1_pairs": gold_stage1_pairs,
    "gold/stage1_stats": gold_stage1_stats,
    "gold/stage2_candidates": gold_stage2_candidates,
    "gold/stage2_examples": lambda: _examples(validation=False),
    "gold/stage2_validation": lambda: _examples(validation=True),
    "gold/stage2_dropped": gold_stage2_dropped,
    "index/embeddings": index_embeddings,
}


def tables_queried(table: str) -> set[str]:
    """The lake tables whose ``dq_<path>`` views the suite of ``table`` queries (cross-table
    expectations), so a run registers and pins only those."""
    views = {"dq_" + name.replace("/", "_"): name for name in TABLES}
    text = " ".join(json.dumps(e.configuration.kwargs, default=str) for e in SUITES[table]())
    return {views[v] for v in re.findall(r"\bdq_[a-z0-9_]+", text) if v in views}


def suite_for(table: str) -> gx.ExpectationSuite:
    """A fresh suite for ``table`` named after it (bronze/publications -> bronze_publications)."""
    if table not in SUITES:
        raise KeyError(f"no expectation suite for table {table!r}; known: {', '.join(SUITES)}")
    return gx.ExpectationSuite(name=table.replace("/", "_"), expectations=SUITES[table]())
