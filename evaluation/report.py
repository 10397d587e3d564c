"""Tables 1-4 and Figures 2-3 of the paper, and a section per further evaluation task, from
the eval Delta tables.

    python -m evaluation.report --lake data/lake --runs bm25-...,stage1-...,sft-...,xembed-... --out reports/eval \\
        [--dim 64] [--compare sft-...,xembed-...]

Writes report.md, report.html, fig2_language_view_differences.png, fig3_macro_hit_at_k.png,
and, when the runs hold them, sections on query types (fig4_query_types.png, a heat map),
strata, InScope, classification and clustering, and in- vs out-of-landscape retrieval
(fig5_landscape.png), with ``--recipes ... --base RUN`` the training-recipe table, and with
``--phage PHAGE,CONTROL --phage-base RUN`` the PHAGE table. Every number comes from eval/metrics, eval/per_query and
eval/significance; the definitions that are ours are in README "Evaluation tasks".
"""

from __future__ import annotations

import argparse
import html
import sys
import tempfile
from pathlib import Path

import pandas as pd

from evaluation.tasks import landscape_gap
from lake import add_lake_arguments, build_session, fs, read_pandas
from lake.cli import run_job
from schemas import defaults

LANG_LABEL = {"zh": "CN", "en": "EN", "ja": "JP"}  # the paper's labels; other codes upper-cased


def languages(present) -> list[str]:
    """The languages in ``present`` ('ALL' left out): the paper's three in its order, then any
    other in code order (a corpus is not limited to zh/en/ja; their rows used to be dropped)."""
    found = set(present) - {"ALL"}
    return [x for x in LANG_LABEL if x in found] + sorted(found - set(LANG_LABEL))


def lang_label(lang: str) -> str:
    return "Overall" if lang == "ALL" else LANG_LABEL.get(lang, lang.upper())


VIEWS = list(defaults.QUERY_VIEWS)
TABLE4_CUTOFFS = (10, 20)  # the paper's Table 4: Hit@10 and Hit@20


STRATUM_KEYS = ("year", "section", "country", "lang")


def load(lake: str, name: str) -> pd.DataFrame:
    """An eval table as pandas; empty (with its columns) when it was never written."""
    return read_pandas(lake, name)


def runs_hint(missing: list[str], known: set[str], shown: int = 8) -> str:
    """``; the lake's runs: ...`` for an error naming unknown run ids, the runs whose id
    starts with a missing one first (``evaluate --name x`` writes run ``x-<UTC time>``).

    >>> runs_hint(["xembed"], {"bm25-1", "xembed-20261206T004512", "base-2"})
    "; the lake's runs: xembed-20261206T004512, base-2, bm25-1"
    """
    if not known:
        return ""
    close = sorted(r for r in known if any(r.startswith(f"{m}-") for m in missing))
    listed = [*close, *sorted(known - set(close))]
    more = f" and {len(listed) - shown} more" if len(listed) > shown else ""
    return f"; the lake's runs: {', '.join(listed[:shown])}{more}"


def mixed_inputs(eval_runs: pd.DataFrame, runs: list[str]) -> str | None:
    """Why ``runs`` do not compare, or None: two of them read a table both read at different
    versions (evaluated before and after the split, curate or prepare_evaluation ran again:
    other queries, other relevance, another collection), or were evaluated on other paper
    views (each language's and the Overall score average the paper views a run evaluated:
    ABS alone beside all four is no comparison). ``eval_runs``: the eval/runs table."""
    if eval_runs.empty:  # never written: nothing recorded to compare
        return None
    chosen = eval_runs[eval_runs.run_id.isin(runs)]
    versions = {row.run_id: dict(row.data_versions or {}) for row in chosen.itertuples()}
    views = {  # None: recorded before eval/runs had the column
        row.run_id: None
        if getattr(row, "query_types", None) is None
        else [v for v in VIEWS if v in set(row.query_types)]
        for row in chosen.itertuples()
    }
    known = [run for run in runs if run in versions]
    for i, a in enumerate(known):
        for b in known[i + 1 :]:
            if None not in (views[a], views[b]) and views[a] != views[b]:
                return (
                    f"runs {a} and {b} were evaluated on different paper views "
                    f"({','.join(views[a]) or 'none'} / {','.join(views[b]) or 'none'}): their "
                    "per-language and Overall scores average different views; evaluate them "
                    "with the same --query-types"
                )
            differ = sorted(
                f"{name} v{versions[a][name]} / v{versions[b][name]}"
                for name in versions[a].keys() & versions[b].keys()
                if versions[a][name] != versions[b][name]
            )
            if differ:
                return (
                    f"runs {a} and {b} were evaluated on different table versions "
                    f"({', '.join(differ)}): their scores do not compare; evaluate them again "
                    "on the same inputs"
                )
    return None


def distinct_names(metrics: pd.DataFrame, runs: list) -> pd.DataFrame:
    """``metrics`` with a name that two of ``runs`` share made unique by its run id
    ("xembed (xembed-20261205)"): the tables label rows by name, and two runs of one name
    (one --name evaluated twice) were one row holding their mean."""
    chosen = metrics[metrics.run_id.isin(runs)][["run_id", "name"]].drop_duplicates()
    shared = chosen[chosen.name.duplicated(keep=False)]
    if shared.empty:
        return metrics
    label = {r.run_id: f"{r.name} ({r.run_id})" for r in shared.itertuples()}
    relabelled = metrics.run_id.isin(label)
    out = metrics.copy()
    out.loc[relabelled, "name"] = out.loc[relabelled, "run_id"].map(label)
    return out


def paper_rows(metrics: pd.DataFrame) -> pd.DataFrame:
    """The rows of the paper's tables: X retrieval over all queries (no stratum)."""
    return metrics[(metrics.task == "retrieval") & (metrics.stratum == "ALL")]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def query_type_table(metrics: pd.DataFrame, runs: list[str], dim: int) -> pd.DataFrame:
    """Query type x run: macro Hit@100, the mean over languages of each type's IPC-section
    macro (the paper's per-view figure, for every type that ran)."""
    m = macro(paper_rows(metrics), runs, dim, "hit", 100)
    cells = m[(m.lang != "ALL") & (m.view != "ALL")]
    if cells.empty:
        return pd.DataFrame()
    wide = cells.pivot_table(index="view", columns="name", values="value", aggfunc="mean")
    order = [t for t in defaults.QUERY_TYPES if t in wide.index]
    names = dict.fromkeys(n for r in runs for n in cells[cells.run_id == r].name)
    return wide.loc[order, list(names)].reset_index().rename(columns={"view": "Query type"})


def figure_query_types(table: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    values = table.set_index("Query type") * 100
    fig, ax = plt.subplots(figsize=(1.6 + 1.1 * len(values.columns), 0.9 + 0.42 * len(values)))
    image = ax.imshow(values.values, cmap="viridis", aspect="auto", vmin=0, vmax=100)
    ax.set_xticks(range(len(values.columns)), values.columns, rotation=30, ha="right")
    ax.set_yticks(range(len(values.index)), values.index)
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values.values[i, j]
            if v == v:  # not NaN
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", color="white", fontsize=8)
    fig.colorbar(image, ax=ax, label="macro Hit@100 (%)")
    ax.set_title("Query type × model")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _run_rows(metrics: pd.DataFrame, runs: list[str], dim: int, **where) -> pd.DataFrame:
    parts = []
    for run in runs:
        rows = metrics[metrics.run_id == run]
        if rows.empty:
            continue
        rows = rows[rows.dim == run_dim(metrics, run, dim)]
        for column, value in where.items():
            rows = rows[rows[column].isin(value if isinstance(value, list) else [value])]
        parts.append(rows)
    return pd.concat(parts) if parts else pd.DataFrame(columns=metrics.columns)


def strata_table(metrics: pd.DataFrame, runs: list[str], dim: int, key: str) -> pd.DataFrame:
    """Cells of one stratum key x run: Hit@100 (mean over query views, all query types), the
    query views per cell (each run's when they differ: a run evaluated more query types),
    small cells marked with '*', a cell a run has none of '–'."""
    rows = _run_rows(metrics, runs, dim, task="retrieval", view="ALL", metric="hit")
    rows = rows[(rows.k == 100) & rows.stratum.str.startswith(f"{key}=")]
    if rows.empty:
        return pd.DataFrame()
    names = list(dict.fromkeys(rows.name))  # in the order of ``runs``
    out = []
    for cell, group in rows.groupby("stratum", sort=True):
        # one count when the runs agree, else each run's (another run may have evaluated
        # more query types)
        counts = dict(zip(group.name, group.n_queries.astype(int), strict=True))
        shown = (
            str(next(iter(counts.values())))
            if len(set(counts.values())) == 1
            else " / ".join(f"{n}: {counts[n]}" for n in names if n in counts)
        )
        line = {key: cell.split("=", 1)[1], "query views": shown}
        for name in names:
            mine = group[group.name == name]
            line[name] = (
                _percent(mine.value.iloc[0]) + ("*" if mine.small_cell.iloc[0] else "")
                if len(mine)
                else "–"
            )
        out.append(line)
    return pd.DataFrame(out, columns=[key, "query views", *names])


def inscope_table(metrics: pd.DataFrame, runs: list[str], dim: int) -> pd.DataFrame:
    """Run: overall nDCG@10 beside InScope@10 at subclass and section (IPC-section macro)."""
    rows = _run_rows(metrics, runs, dim, lang="ALL", view="ALL", ipc_section="MACRO")
    rows = rows[rows.stratum == "ALL"]
    wanted = {
        ("retrieval", "ndcg"): "nDCG@10",
        ("inscope", "inscope_subclass"): "InScope@10 subclass",
        ("inscope", "inscope_section"): "InScope@10 section",
    }
    out = []
    for run in runs:
        mine = rows[rows.run_id == run]
        line = {"Model": mine.name.iloc[0] if len(mine) else run}
        for (task, metric), label in wanted.items():
            hit = mine[(mine.task == task) & (mine.metric == metric)]
            line[label] = float(hit.value.iloc[0]) if len(hit) else float("nan")
        if len(mine[mine.task == "inscope"]):
            out.append(line)
    return pd.DataFrame(out)


def probe_table(metrics: pd.DataFrame, runs: list[str]) -> pd.DataFrame:
    """Run x dim x label level: macro/micro F1 and V-measure, homogeneity, completeness."""
    rows = metrics[metrics.run_id.isin(runs) & metrics.task.isin(["classification", "clustering"])]
    if rows.empty:
        return pd.DataFrame()
    rows = rows.assign(label=rows.stratum.str.removeprefix("label="))
    wide = rows.pivot_table(
        index=["name", "dim", "label"], columns="metric", values="value", sort=False
    )
    columns = ("macro_f1", "micro_f1", "v_measure", "homogeneity", "completeness")
    wide = wide[[c for c in columns if c in wide.columns]].reset_index()
    return wide.rename(columns={"name": "Model", "dim": "Dim", "label": "Labels"})


_SIDES = ("landscape=IN", "landscape=OUT")


def landscape_table(metrics: pd.DataFrame, runs: list[str], dim: int) -> pd.DataFrame:
    """Run: Hit@100 of queries IN and OUT of the landscape (view ALL) and the gap in %. A run
    evaluated with a landscape that holds none of its queries (or all of them) keeps its row,
    the empty side shown as –, 0 queries."""
    rows = _run_rows(metrics, runs, dim, task="retrieval", view="ALL", metric="hit")
    rows = rows[(rows.k == 100) & rows.stratum.isin(list(_SIDES))]
    out = []
    for run in runs:
        mine = rows[rows.run_id == run].set_index("stratum")
        if mine.empty:  # evaluated without --landscape
            continue
        held = [s in mine.index for s in _SIDES]
        inside, outside = (
            float(mine.value[s]) if h else float("nan") for s, h in zip(_SIDES, held, strict=True)
        )
        gap = landscape_gap(inside, outside) if all(held) else None
        out.append(
            {
                "Model": mine.name.iloc[0],
                "IN": inside,
                "OUT": outside,
                "gap (%)": "n/a" if gap is None else f"{gap:.1f}",
                "IN queries": int(mine.n_queries[_SIDES[0]]) if held[0] else 0,
                "OUT queries": int(mine.n_queries[_SIDES[1]]) if held[1] else 0,
            }
        )
    return pd.DataFrame(out)


def figure_landscape(table: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(1.5 + 1.2 * len(table), 3.5))
    x = range(len(table))
    ax.bar([i - 0.2 for i in x], table.IN * 100, width=0.4, label="IN landscape")
    ax.bar([i + 0.2 for i in x], table.OUT * 100, width=0.4, label="OUT of landscape")
    ax.set_xticks(list(x), table.Model, rotation=30, ha="right")
    ax.set_ylabel("Hit@100 (%)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def task_sections(
    metrics: pd.DataFrame, runs: list[str], dim: int, out: Path
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(sections, figures) of the tasks beyond the paper's tables, for what the runs hold."""
    sections, figures = [], []
    types = query_type_table(metrics, runs, dim)
    if not types.empty:
        sections.append(("Query types: macro Hit@100 (%) per query type", _fmt(types)))
        figure_query_types(types, out / "fig4_query_types.png")
        figures.append(("Figure 4: query type × model, macro Hit@100", "fig4_query_types.png"))
    for key in STRATUM_KEYS:
        table = strata_table(metrics, runs, dim, key)
        if not table.empty:
            sections.append(
                (
                    f"Strata by {key}: Hit@100 (%) over all query views (* fewer than the "
                    "minimum count)",
                    _fmt(table, False),
                )
            )
    inscope = inscope_table(metrics, runs, dim)
    if not inscope.empty:
        sections.append(("InScope@10 beside nDCG@10 (IPC-section macro, %)", _fmt(inscope)))
    probe = probe_table(metrics, runs)
    if not probe.empty:
        sections.append(
            ("Classification (F1) and clustering (V-measure) on frozen TAC", _fmt(probe, False))
        )
    landscape = landscape_table(metrics, runs, dim)
    if not landscape.empty:
        sections.append(("In- vs out-of-landscape Hit@100 (%)", _fmt(landscape)))
        figure_landscape(landscape, out / "fig5_landscape.png")
        figures.append(("Figure 5: in- vs out-of-landscape Hit@100", "fig5_landscape.png"))
    return sections, figures


def _value(rows: pd.DataFrame, **where) -> float:
    for column, value in where.items():
        rows = rows[rows[column].isna()] if value is None else rows[rows[column] == value]
    return float(rows.value.iloc[0]) if len(rows) else float("nan")


def recipe_table(
    metrics: pd.DataFrame, significance: pd.DataFrame, runs: list[str], base: str, dim: int
) -> pd.DataFrame:
    """The recipe comparison of paper 002: per run (the base model first, then each recipe and
    its matched control) retrieval nDCG@10 and Hit@100 (IPC-section macro over the paper's
    views) with the paired-test p-value against the base, classification macro-F1 and
    clustering V-measure on frozen TAC (section, subclass), nDCG@10 IN / OUT of the landscape."""
    out = []
    for run in [base, *[r for r in runs if r != base]]:
        rows = _run_rows(metrics, [run], dim)
        if rows.empty:
            continue
        overall = rows[
            (rows.task == "retrieval")
            & (rows.lang == "ALL")
            & (rows.view == "ALL")
            & (rows.ipc_section == "MACRO")
            & (rows.stratum == "ALL")
        ]
        strata = rows[(rows.task == "retrieval") & (rows.view == "ALL")]
        line = {"Model": rows.name.iloc[0]}
        for label, metric, k in (("nDCG@10", "ndcg", 10), ("Hit@100", "hit", 100)):
            line[label] = _percent(_value(overall, metric=metric, k=k))
            p = (
                significance[
                    (significance.run_a == base)
                    & (significance.run_b == run)
                    & (significance.dim == dim)
                    & (significance.lang == "ALL")
                    & (significance.view == "ALL")
                    & (significance.metric == metric)
                    & (significance.k == k)
                ]
                if not significance.empty
                else significance
            )
            line[f"p {label} vs base"] = p_text(p.p_value.iloc[0]) if len(p) else ""
        for task, metric, short in (
            ("classification", "macro_f1", "F1"),
            ("clustering", "v_measure", "V"),
        ):
            for level in ("section", "subclass"):
                value = _value(rows[rows.task == task], metric=metric, stratum=f"label={level}")
                line[f"{short} {level}"] = _percent(value)
        for cell in ("IN", "OUT"):
            value = _value(strata, metric="ndcg", k=10, stratum=f"landscape={cell}")
            line[f"nDCG@10 {cell}"] = _percent(value)
        out.append(line)
    return pd.DataFrame(out)


def phage_sections(
    metrics: pd.DataFrame, significance: pd.DataFrame, runs: list[str], base: str, dim: int
) -> list[tuple[str, str]]:
    """PHAGE (``runs``: the graph-attention model, then its no-graph control) against the base
    it was trained from: the recipe table's columns, then the paired tests of PHAGE against
    the control (the graph's own effect)."""
    missing = [r for r in [base, *runs] if r not in set(metrics.run_id)]
    if missing:
        raise ValueError(f"eval/metrics has no rows for PHAGE run(s) {missing}")
    out = [
        (
            f"PHAGE: claim-graph attention vs the same objective without it (%, {dim} dimensions; "
            f"p: paired randomization test against {base})",
            _fmt(recipe_table(metrics, significance, runs, base, dim)),
        )
    ]
    graph, control = runs[0], runs[-1]
    if not significance.empty and graph != control:
        tests = significance[
            (significance.run_a == control)
            & (significance.run_b == graph)
            & (significance.dim == dim)
            & (significance.lang == "ALL")
            & (significance.view == "ALL")
        ]
        if not tests.empty:
            shown = tests[["metric", "k", "value_a", "value_b", "diff", "p_value", "n_queries"]]
            out.append((f"PHAGE paired tests, A = {control}, B = {graph}", _fmt(shown, False)))
    return out


def run_dim(metrics: pd.DataFrame, run: str, dim: int) -> int:
    dims = set(metrics[metrics.run_id == run].dim)
    if dim in dims:
        return dim
    if dims == {0}:
        return 0  # BM25
    raise ValueError(f"run {run} has no dimension {dim} (has {sorted(dims)})")


def macro(
    metrics: pd.DataFrame, runs: list[str], dim: int, metric: str, k: int | None
) -> pd.DataFrame:
    """run, name, lang, view, value of the IPC-section macro scores (lang/view may be ALL)."""
    parts = []
    for run in runs:
        d = run_dim(metrics, run, dim)
        m = metrics[
            (metrics.run_id == run)
            & (metrics.dim == d)
            & (metrics.ipc_section == "MACRO")
            & (metrics.metric == metric)
        ]
        m = m[m.k == k] if k is not None else m[m.k.isna()]
        parts.append(m)
    return (
        pd.concat(parts)[["run_id", "name", "lang", "view", "value"]] if parts else pd.DataFrame()
    )


def _percent(value: float) -> str:
    """A fraction as a percent cell; a value not measured (NaN) as "–", never "nan"."""
    return "–" if pd.isna(value) else f"{100 * value:.2f}"


def p_text(p: float) -> str:
    """A p-value as printed: 4 decimals, or 2 significant digits below 0.0001 (a
    randomization test's p is at least 1 / (permutations + 1), never 0).

    >>> p_text(0.03125), p_text(9.9999e-06)
    ('0.0312', '1.0e-05')
    """
    return "–" if pd.isna(p) else f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def _fmt(frame: pd.DataFrame, percent: bool = True) -> str:
    shown = frame.copy()
    for c in shown.columns:
        if c == "p_value":
            shown[c] = shown[c].map(p_text)
        elif shown[c].dtype.kind == "f":
            shown[c] = shown[c].map(
                lambda v: _percent(v) if percent else "–" if pd.isna(v) else f"{v:.4f}"
            )
    header = "| " + " | ".join(map(str, shown.columns)) + " |"
    rule = "|" + "---|" * len(shown.columns)
    rows = ["| " + " | ".join(map(str, r)) + " |" for r in shown.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def table1(per_query: pd.DataFrame, run: str) -> pd.DataFrame:
    rows = per_query[per_query.run_id == run]
    rows = rows[rows.dim == rows.dim.min()]
    # an effective query without an IPC section counts in ALL: in "none" and in the total
    rows = rows.assign(ipc_section=rows.ipc_section.fillna("none"))
    counts = (
        rows.groupby(["lang", "view", "ipc_section"]).size().unstack("ipc_section", fill_value=0)
    )
    counts["Total"] = counts.sum(axis=1)
    return counts.reset_index().rename(columns={"lang": "Language", "view": "View"})


def table2(m: pd.DataFrame) -> pd.DataFrame:
    overall = m[m.view == "ALL"].pivot_table(
        index="name", columns="lang", values="value", sort=False
    )
    cols = [*languages(overall.columns), "ALL"]
    return (
        overall[cols]
        .rename(columns={c: lang_label(c) for c in cols})
        .reset_index()
        .rename(columns={"name": "Model"})
    )


def table3(m: pd.DataFrame) -> pd.DataFrame:
    cells = m[(m.lang != "ALL") & (m.view != "ALL")]
    wide = cells.pivot_table(index=["lang", "view"], columns="name", values="value", sort=False)
    return wide.reset_index().rename(columns={"lang": "Language", "view": "View"})


def table4(metrics: pd.DataFrame, a: str, b: str, dim: int) -> pd.DataFrame:
    """Hit@10 and Hit@20 of runs ``a`` and ``b`` per language; a cutoff that either run was not
    evaluated at is left out (``table4_title`` says which); a language only one run has: –."""
    rows = []
    for k in TABLE4_CUTOFFS:
        m = macro(metrics, [a, b], dim, "hit", k)
        langs = m[m.view == "ALL"]
        if not {a, b} <= set(langs.run_id):
            continue
        for lang in [*languages(langs.lang), *(["ALL"] if "ALL" in set(langs.lang) else [])]:
            cells = {
                run: langs[(langs.run_id == run) & (langs.lang == lang)].value for run in (a, b)
            }
            value = {run: float(c.iloc[0]) if len(c) else float("nan") for run, c in cells.items()}
            rows.append(
                {
                    "K": k,
                    "Language": lang_label(lang),
                    "A": value[a],
                    "B": value[b],
                    "B - A": value[b] - value[a],
                }
            )
    return pd.DataFrame(rows, columns=["K", "Language", "A", "B", "B - A"])


def table4_title(paired: pd.DataFrame, a: str, b: str) -> str:
    """Table 4's heading, naming a cutoff it could not show (a run evaluated without it)."""
    missing = [k for k in TABLE4_CUTOFFS if k not in set(paired.K)]
    title = f"Table 4: Hit@10 and Hit@20 (%), A = {a}, B = {b}"
    if missing:
        title += (
            f"; {' and '.join(f'Hit@{k}' for k in missing)} not shown: evaluate both runs with "
            f"{','.join(map(str, missing))} among --cutoffs"
        )
    return title


def figure2(m: pd.DataFrame, a: str, b: str, path: Path) -> None:
    plt = _plt()
    cells = m[m.lang != "ALL"]
    wide = cells.pivot_table(index=["lang", "view"], columns="run_id", values="value")
    diff = (wide[b] - wide[a]) * 100
    fig, ax = plt.subplots(figsize=(9, 3.5))
    labels = [f"{lang_label(lang)}-{view}" for lang, view in diff.index]
    ax.bar(labels, diff.values, color=["tab:blue" if v >= 0 else "tab:red" for v in diff.values])
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("Δ macro Hit@100 (pp)")
    ax.set_title("Language × view differences (B − A)")
    plt.xticks(rotation=60, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def figure3(metrics: pd.DataFrame, runs: list[str], dim: int, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        d = run_dim(metrics, run, dim)
        m = metrics[
            (metrics.run_id == run)
            & (metrics.dim == d)
            & (metrics.metric == "hit")
            & (metrics.lang == "ALL")
            & (metrics.view == "ALL")
        ].sort_values("k")
        ax.plot(m.k, m.value * 100, marker="o", label=m.name.iloc[0] if len(m) else run)
    ax.set_xscale("log")
    ax.set_xlabel("K")
    ax.set_ylabel("overall macro Hit@K (%)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build(
    lake: str,
    runs: list[str],
    out: Path,
    dim: int = 64,
    compare: tuple[str, str] | None = None,
    recipes: list[str] | None = None,
    base: str | None = None,
    phage: list[str] | None = None,
    phage_base: str | None = None,
) -> Path:
    every, per_query = load(lake, "eval/metrics"), load(lake, "eval/per_query")
    if every.empty:
        raise ValueError(
            f"{lake} holds no evaluation (eval/metrics has no rows): run evaluation.evaluate "
            "on this lake first, or name the lake the evaluations wrote"
        )
    every = distinct_names(every, [*runs, *(recipes or []), *(phage or []), base, phage_base])
    metrics = paper_rows(every)
    missing = [r for r in runs if r not in set(metrics.get("run_id", []))]
    if missing:
        raise ValueError(
            f"eval/metrics has no rows for run(s) {missing}"
            + runs_hint(missing, set(metrics.get("run_id", [])))
        )
    mixed = mixed_inputs(
        load(lake, "eval/runs"), [*runs, *(recipes or []), *(phage or []), base, phage_base]
    )
    if mixed:
        raise ValueError(mixed)
    m100 = macro(metrics, runs, dim, "hit", 100)
    without = {
        run: sorted(
            int(k) for k in metrics[(metrics.run_id == run) & (metrics.metric == "hit")].k.unique()
        )
        for run in runs
        if run not in set(m100.run_id)
    }
    if without:  # pandas failed later with "None of [Index(['ALL'] ...)] are in the [columns]"
        raise ValueError(
            "the paper's tables are Hit@100, and run(s) "
            + ", ".join(f"{run} (hit at {ks or 'no cutoff'})" for run, ks in without.items())
            + " have no Hit@100: evaluate them with 100 among --cutoffs"
        )
    out.mkdir(parents=True, exist_ok=True)
    a, b = compared_runs(runs, compare)
    m100 = m100[m100.view.isin([*VIEWS, "ALL"])]  # the paper's tables: its four views
    paired = table4(metrics, a, b, dim)
    sections = [
        (
            "Table 1: effective query counts per view by IPC section",
            _fmt(table1(per_query, runs[0]), False),
        ),
        (f"Table 2: IPC-section macro Hit@100 (%), {dim} dimensions", _fmt(table2(m100))),
        ("Table 3: macro Hit@100 (%) by language and query view", _fmt(table3(m100))),
        (table4_title(paired, a, b), _fmt(paired)),
    ]
    significance = load(lake, "eval/significance")
    if not significance.empty:
        sig = significance[
            (significance.run_a == a) & (significance.run_b == b) & (significance.dim == dim)
        ]
        if not sig.empty:
            shown = sig[
                [
                    "lang",
                    "view",
                    "metric",
                    "k",
                    "value_a",
                    "value_b",
                    "diff",
                    "p_value",
                    "n_queries",
                ]
            ]
            sections.append((f"Paired randomization tests, A = {a}, B = {b}", _fmt(shown, False)))
    figure2(m100, a, b, out / "fig2_language_view_differences.png")
    figure3(metrics, runs, dim, out / "fig3_macro_hit_at_k.png")
    figures = [
        (
            "Figure 2: language × view differences of macro Hit@100",
            "fig2_language_view_differences.png",
        ),
        ("Figure 3: overall macro Hit@K across cutoffs", "fig3_macro_hit_at_k.png"),
    ]
    more_sections, more_figures = task_sections(every, runs, dim, out)
    if recipes:
        missing = [r for r in [base, *recipes] if r not in set(every.run_id)]
        if missing:
            raise ValueError(f"eval/metrics has no rows for recipe run(s) {missing}")
        recipe = recipe_table(every, significance, recipes, base, dim)
        more_sections.insert(
            0,
            (
                f"Training recipes (%, {dim} dimensions; p: paired randomization test against "
                f"{base}; IN / OUT: mean over query views of the landscape)",
                _fmt(recipe),
            ),
        )
    if phage:
        more_sections[:0] = phage_sections(every, significance, phage, phage_base or base, dim)
    sections += more_sections
    figures += more_figures
    md = ["# xembed evaluation report", "", f"Runs: {', '.join(runs)}", ""]
    for title, body in sections:
        md += [f"## {title}", "", body, ""]
    for title, file in figures:
        md += [f"## {title}", "", f"![{title}]({file})", ""]
    (out / "report.md").write_text("\n".join(md))
    (out / "report.html").write_text(_html(sections, figures, runs))
    return out / "report.md"


def summary_table(metrics, significance, runs: list[str], dim: int, a: str, b: str) -> str:
    """Table 2 (macro Hit@100 %) with a last row: the p-value of B vs A per column."""
    wide = table2(macro(metrics, runs, dim, "hit", 100))
    shown = wide.copy()
    for c in shown.columns[1:]:
        shown[c] = shown[c].map(_percent)
    if not significance.empty:
        sig = significance[
            (significance.run_a == a)
            & (significance.run_b == b)
            & (significance.dim == dim)
            & (significance.view == "ALL")
            & (significance.metric == "hit")
            & (significance.k == 100)
        ]
        p = {lang_label(r.lang): r.p_value for r in sig.itertuples()}
        if p:
            label = f"p ({b} vs {a})"
            row = [label] + [p_text(p[c]) if c in p else "" for c in shown.columns[1:]]
            shown.loc[len(shown)] = row
    return _fmt(shown)


def _html(sections, figures, runs) -> str:
    def table(md: str) -> str:
        lines = [line for line in md.splitlines() if not line.startswith("|---")]
        cells = [[html.escape(c.strip()) for c in line.strip("|").split("|")] for line in lines]
        head = "".join(f"<th>{c}</th>" for c in cells[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells[1:]
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>xembed evaluation</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}"
        "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}</style></head><body>",
        "<h1>xembed evaluation report</h1>",
        f"<p>Runs: {html.escape(', '.join(runs))}</p>",
    ]
    for title, body in sections:
        parts += [f"<h2>{html.escape(title)}</h2>", table(body)]
    for title, file in figures:
        parts += [
            f"<h2>{html.escape(title)}</h2>",
            f"<img src='{file}' alt='{html.escape(title)}'>",
        ]
    return "\n".join([*parts, "</body></html>"])


def compared_runs(runs: list[str], compare: tuple[str, str] | None) -> tuple[str, str]:
    """Table 4's and Figure 2's A and B: ``compare``, else the last two runs (one run: itself)."""
    if compare:
        return compare
    return (runs[-2], runs[-1]) if len(runs) >= 2 else (runs[0], runs[0])


def parse_compare(text: str | None, runs: list[str]) -> tuple[str, str] | None:
    """``--compare A,B``: two run ids among ``runs`` (the tables read only those), else an error
    naming what is wrong; None when not given."""
    if text is None:
        return None
    pair = tuple(r.strip() for r in text.split(","))
    if len(pair) != 2 or not all(pair):
        raise ValueError(f"--compare takes two run ids A,B, got {text!r}")
    absent = [r for r in pair if r not in runs]
    if absent:
        raise ValueError(
            f"--compare names {', '.join(absent)}, not among --runs ({', '.join(runs)}): "
            "add it to --runs"
        )
    return pair


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    add_lake_arguments(parser)
    parser.add_argument("--runs", required=True, help="comma-separated run ids, in table order")
    parser.add_argument("--out", required=True)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument(
        "--compare", default=None, help="A,B for Table 4 / Figure 2 (default: the last two runs)"
    )
    parser.add_argument(
        "--recipes",
        default="",
        help="comma-separated run ids of recipe trainings (and matched controls): the recipe table",
    )
    parser.add_argument(
        "--base", default=None, help="the base model's run id: the recipe table's reference"
    )
    parser.add_argument(
        "--phage",
        default="",
        help="comma-separated run ids of the PHAGE model and its no-graph control: the PHAGE table",
    )
    parser.add_argument(
        "--phage-base",
        default=None,
        help="the run id of PHAGE's base model (default: --base)",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print the overall / per-language macro Hit@100 of every run (Table 2)",
    )
    args = parser.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if not runs:
        parser.error(f"--runs names no run id: {args.runs!r}")
    try:
        compare = parse_compare(args.compare, runs)
    except ValueError as e:
        parser.error(str(e))
    recipes = [r for r in args.recipes.split(",") if r]
    if recipes and not args.base:
        parser.error("--recipes needs --base (the base model's run id)")
    phage = [r for r in args.phage.split(",") if r]
    if phage and not (args.phage_base or args.base):
        parser.error("--phage needs --phage-base or --base (the base model's run id)")
    if problem := fs.no_lake_folder(args.lake):
        parser.error(problem)
    spark = build_session("xembed-report", args.master)  # the session every read below shares
    # a URI (hdfs://, s3a://: a lake's reports folder) is written locally, then copied there;
    # pathlib would have made "hdfs:/..." a local folder under the working directory
    local = fs.local_path(args.out)
    folder = local if local is not None else Path(tempfile.mkdtemp(prefix="xembed-report-"))
    path = build(
        args.lake, runs, folder, args.dim, compare, recipes, args.base, phage, args.phage_base
    )
    if local is None:
        fs.publish(spark, folder, args.out)
        path = f"{args.out.rstrip('/')}/{path.name}"
    if not args.summary:
        print(path)
        return 0
    # labelled as build() labels them: two runs of one --name are two rows, never their mean
    named = [*runs, *(recipes or []), *(phage or []), args.base, args.phage_base]
    metrics = paper_rows(distinct_names(load(args.lake, "eval/metrics"), named))
    a, b = compared_runs(runs, compare)
    print(f"\nIPC-section macro Hit@100 (%), {args.dim} dimensions (BM25: lexical)\n")
    print(summary_table(metrics, load(args.lake, "eval/significance"), runs, args.dim, a, b))
    print(f"\nreport:    {str(path).rsplit('/', 1)[0]}/report.html")
    return 0


if __name__ == "__main__":
    sys.exit(run_job("report", main))
