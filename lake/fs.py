"""Small file-system operations through Hadoop's FileSystem API (any Spark URI)."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession


def _fs(spark: SparkSession, path: str):
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def list_names(spark: SparkSession, directory: str) -> list[str]:
    fs, path = _fs(spark, directory)
    if not fs.exists(path):
        return []
    return sorted(status.getPath().getName() for status in fs.listStatus(path))


def rename(spark: SparkSession, source: str, target: str) -> None:
    fs, src = _fs(spark, source)
    _, dst = _fs(spark, target)
    if not fs.rename(src, dst):
        raise OSError(f"could not rename {source} to {target}")


def write_text(spark: SparkSession, path: str, text: str) -> None:
    fs, hpath = _fs(spark, path)
    stream = fs.create(hpath, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def read_text(spark: SparkSession, path: str) -> str:
    """A whole file as UTF-8 text (through Hadoop: Spark's file sources skip ``_``-names)."""
    fs, hpath = _fs(spark, path)
    jvm = spark.sparkContext._jvm
    stream = fs.open(hpath)
    try:
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()


def delete(spark: SparkSession, path: str) -> None:
    fs, hpath = _fs(spark, path)
    if fs.exists(hpath):
        fs.delete(hpath, True)


def local_path(uri: str) -> Path | None:
    """The local path of a plain path or ``file:`` URI; None for any other scheme."""
    if uri.startswith("file:"):
        return Path(urlparse(uri).path)
    if "://" in uri:
        return None
    return Path(uri)


def exists(spark: SparkSession, path: str) -> bool:
    fs, hpath = _fs(spark, path)
    return bool(fs.exists(hpath))


def fetch(spark: SparkSession, uri: str, cache: Path, version: str = "") -> Path:
    """A local folder with the contents of ``uri``: the folder itself when it is local, else a
    copy under ``cache`` (Lucene, FAISS and pyarrow read local files), made once per
    ``version`` of the remote contents (the caller's key, e.g. a hash of its manifest), so a
    rewritten remote folder is copied again instead of served stale."""
    local = local_path(uri)
    if local is not None:
        return local
    name = uri.split("://", 1)[1].strip("/").replace("/", "_")
    target = cache / (f"{name}-{version}" if version else name)
    if not target.exists():
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        fs, src = _fs(spark, uri)
        destination = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(str(staging))
        fs.copyToLocalFile(False, src, destination, True)  # raw local FS: no .crc files
        staging.rename(target)
    return target


def publish(spark: SparkSession, folder: Path, uri: str) -> None:
    """Copy a local folder's files to ``uri`` (any Spark URI), replacing what is there."""
    local = local_path(uri)
    if local is not None:
        if local.resolve() != folder.resolve():
            shutil.rmtree(local, ignore_errors=True)
            shutil.copytree(folder, local)
        return
    delete(spark, uri)
    fs, dst = _fs(spark, uri)
    source = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(str(folder))
    fs.copyFromLocalFile(False, True, source, dst)
