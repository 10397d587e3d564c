"""Retrieval back ends: Pyserini BM25 (one Lucene index per language) and FAISS dense search.

Both are used by candidate mining (Stage II) and by the evaluator. Pyserini needs a JDK >= 21
(``retrieval.java`` finds one); FAISS uses the GPU when faiss-gpu and a device are present.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.java import prepare_pyserini_env
from schemas.defaults import BM25_QUERY_CHARS

INDEX_TYPES = ("flat", "ivf", "hnsw")
INDEX_INFO = "index.json"  # written beside a saved FAISS index and a set of BM25 indexes


# --- BM25 -------------------------------------------------------------------------------------


def manifest_digest(folder: str | Path) -> str | None:
    """SHA-256 of a prepared folder's ``_manifest.json`` (None without one): what an index
    built from the folder records, so a reader can tell it was prepared again since."""
    path = Path(folder) / "_manifest.json"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


ENCODED = "_encoded.json"  # in a prepared folder: what evaluation.encode encoded from it


def record_encoded(folder: str | Path, encoder: str, kind: str) -> None:
    """Note in ``folder`` that ``encoder``'s ``kind`` embeddings were encoded from its current
    preparation (:func:`manifest_digest`)."""
    path = Path(folder) / ENCODED
    record = json.loads(path.read_text()) if path.is_file() else {}
    record[f"{encoder}/{kind}"] = manifest_digest(folder)
    staging = path.with_name(path.name + ".partial")
    staging.write_text(json.dumps(record, indent=2, sort_keys=True))
    staging.replace(path)


def encoded_from(folder: str | Path, encoder: str, kind: str) -> str | None:
    """The preparation (manifest digest) ``encoder``'s ``kind`` embeddings were encoded from;
    None when ``folder`` records none."""
    path = Path(folder) / ENCODED
    return json.loads(path.read_text()).get(f"{encoder}/{kind}") if path.is_file() else None


def build_bm25_index(collection: str, index: str, lang: str, threads: int = 2) -> None:
    """Index a Pyserini JsonCollection folder with the language's analyzer (en: default)."""
    env_home = prepare_pyserini_env()
    cmd = [
        sys.executable,
        "-m",
        "pyserini.index.lucene",
        "--collection",
        "JsonCollection",
        "--input",
        collection,
        "--index",
        index,
        "--generator",
        "DefaultLuceneDocumentGenerator",
        "--threads",
        str(threads),
    ]
    if lang != "en":
        cmd += ["--language", lang]
    import os

    env = {**os.environ, "JAVA_HOME": str(env_home)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"Pyserini indexing of {collection} ({lang}) failed:\n{done.stderr[-3000:]}"
        )


class Bm25:
    """Lucene searchers per language, opened lazily; long queries are shortened until they run."""

    def __init__(self, root: str, k1: float = 0.9, b: float = 0.4):
        self.root = Path(root)
        self.k1, self.b = k1, b
        self._searchers: dict = {}

    def languages(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def searcher(self, lang: str):
        if lang not in self._searchers:
            path = self.root / lang
            if not path.exists():
                self._searchers[lang] = None
            else:
                prepare_pyserini_env()
                from pyserini.search.lucene import LuceneSearcher

                searcher = LuceneSearcher(str(path))
                if lang != "en":
                    searcher.set_language(lang)
                searcher.set_bm25(self.k1, self.b)
                self._searchers[lang] = searcher
        return self._searchers[lang]

    def search(
        self, text: str, lang: str, k: int, max_chars: int = BM25_QUERY_CHARS
    ) -> list[tuple[str, float]]:
        """[(docid, score)] best first; [] when there is no index for ``lang``."""
        searcher = self.searcher(lang)
        if searcher is None or not text.strip():
            return []
        query = text[:max_chars]
        while True:
            try:
                return [(h.docid, float(h.score)) for h in searcher.search(query, k=k)]
            except Exception as exc:  # Lucene's TooManyClauses on very long queries
                if len(query) < 50 or "Clause" not in str(exc):
                    raise
                query = query[: len(query) // 2]


# --- dense ------------------------------------------------------------------------------------


@dataclass
class DenseIndex:
    """A FAISS inner-product index over L2-normalised embeddings, with ids and raw vectors."""

    index: object
    ids: list[str]
    vectors: np.ndarray  # (n, d) float32, rows aligned with ids

    def __post_init__(self):
        self.row = {doc: i for i, doc in enumerate(self.ids)}

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, len(self.ids))
        if hasattr(self.index, "nprobe"):  # IVF: probe lists expected to hold 2k vectors
            per_list = len(self.ids) / self.index.nlist
            wanted = math.ceil(2 * k / per_list)
            self.index.nprobe = min(self.index.nlist, max(self.index.nprobe, wanted))
        if hasattr(self.index, "hnsw"):  # HNSW keeps efSearch candidates (FAISS's default 16)
            self.index.hnsw.efSearch = max(self.index.hnsw.efSearch, 2 * k)
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)

    def score(self, query: np.ndarray, doc_ids: list[str]) -> np.ndarray:
        """Inner products of one query with the given documents (any document, not just hits)."""
        rows = np.fromiter((self.row[d] for d in doc_ids), dtype=np.int64, count=len(doc_ids))
        return self.vectors[rows] @ query.astype(np.float32)

    def save(self, folder: str, encoder: str | None = None, **record) -> None:
        """index.faiss, vectors.npy, ids.json and index.json (the encoder whose embeddings
        it holds, their dimension and count, and ``record``: a reader can check it searches
        like with like)."""
        import faiss

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        (out / INDEX_INFO).unlink(missing_ok=True)  # written last: none after a killed save
        faiss.write_index(self._cpu_index(), str(out / "index.faiss"))
        np.save(out / "vectors.npy", self.vectors)
        (out / "ids.json").write_text(json.dumps(self.ids))
        info = {
            "encoder": encoder,
            "dims": int(self.vectors.shape[1]),
            "documents": len(self.ids),
            **record,
        }
        (out / INDEX_INFO).write_text(json.dumps(info, indent=2))

    @staticmethod
    def info(folder: str) -> dict:
        """What ``save`` recorded; FileNotFoundError when the folder holds no index, or no
        index.json beside it (its save was interrupted, or it predates the record)."""
        folder = Path(folder)
        if not (folder / "index.faiss").is_file():
            raise FileNotFoundError(f"{folder}: no FAISS index (index.faiss)")
        if not (folder / INDEX_INFO).is_file():
            raise FileNotFoundError(
                f"{folder}: no {INDEX_INFO} beside index.faiss (its save was interrupted, or "
                "it was saved before the record existed)"
            )
        return json.loads((folder / INDEX_INFO).read_text())

    def _cpu_index(self):
        import faiss

        return (
            faiss.index_gpu_to_cpu(self.index) if hasattr(self.index, "getDevice") else self.index
        )

    @classmethod
    def load(cls, folder: str, use_gpu: bool = True) -> DenseIndex:
        import faiss

        folder = Path(folder)
        index = faiss.read_index(str(folder / "index.faiss"))
        if use_gpu and faiss.get_num_gpus() > 0:
            index = faiss.index_cpu_to_all_gpus(index)
        vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        return cls(index, json.loads((folder / "ids.json").read_text()), vectors)

    @classmethod
    def build(
        cls,
        ids: list[str],
        vectors: np.ndarray,
        kind: str = "flat",
        nlist: int | None = None,
        hnsw_m: int = 32,
    ) -> DenseIndex:
        """Exact inner product (flat, default), IVF for large corpora, or HNSW."""
        import faiss

        if kind not in INDEX_TYPES:
            raise ValueError(f"index type must be one of {INDEX_TYPES}, got {kind!r}")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        d = vectors.shape[1]
        if kind == "flat":
            index = faiss.IndexFlatIP(d)
        elif kind == "ivf":
            # 4 sqrt(n) lists, each trained on at least FAISS's 39 points (a corpus smaller
            # than the lists failed inside FAISS's clustering)
            nlist = nlist or max(1, min(int(4 * np.sqrt(len(ids))), len(ids) // 39))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)
            index.nprobe = max(1, nlist // 8)
        else:
            index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.add(vectors)
        return cls(index, list(ids), vectors)


def union_candidates(bm25_hits: list[tuple[str, float]], dense_ids: list[str], k: int) -> list[str]:
    """Up to ``k`` unique ids alternating BM25 and dense ranks (BM25 first at each rank)."""
    out: list[str] = []
    seen: set[str] = set()
    for i in range(max(len(bm25_hits), len(dense_ids))):
        for doc in ((bm25_hits[i][0],) if i < len(bm25_hits) else ()) + (
            (dense_ids[i],) if i < len(dense_ids) else ()
        ):
            if doc not in seen:
                seen.add(doc)
                out.append(doc)
                if len(out) == k:
                    return out
    return out
