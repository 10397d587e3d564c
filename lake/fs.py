"""Small file-system operations on any Spark URI.

A classic session goes through Hadoop's FileSystem API in the driver's JVM (the file systems
and credentials Spark itself is configured with). A Spark Connect client has no JVM in its
process: it goes through pyarrow's file systems instead (local paths and ``file:``, ``s3a://``
as ``s3://``, ``hdfs://``, ``gs://``), which the client must be able to reach.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from lake.cli import one_line
from lake.session import is_connect


def _fs(spark: SparkSession, path: str):
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def list_names(spark: SparkSession, directory: str) -> list[str]:
    if is_connect(spark):
        return _arrow.list_names(directory)
    fs, path = _fs(spark, directory)
    if not fs.exists(path):
        return []
    return sorted(status.getPath().getName() for status in fs.listStatus(path))


def rename(spark: SparkSession, source: str, target: str) -> None:
    if is_connect(spark):
        return _arrow.rename(source, target)
    fs, src = _fs(spark, source)
    _, dst = _fs(spark, target)
    if not fs.rename(src, dst):
        raise OSError(f"could not rename {source} to {target}")


def write_text(spark: SparkSession, path: str, text: str) -> None:
    if is_connect(spark):
        return _arrow.write_text(path, text)
    fs, hpath = _fs(spark, path)
    stream = fs.create(hpath, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def read_text(spark: SparkSession, path: str) -> str:
    """A whole file as UTF-8 text (through Hadoop: Spark's file sources skip ``_``-names)."""
    if is_connect(spark):
        return _arrow.read_text(path)
    fs, hpath = _fs(spark, path)
    jvm = spark.sparkContext._jvm
    stream = fs.open(hpath)
    try:
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()


# Byte-order marks of encodings other than UTF-8, longest first (UTF-32-LE starts like UTF-16-LE).
BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def bom_encoding(head: bytes) -> str | None:
    """The non-UTF-8 encoding a file's first bytes declare by their byte-order mark, if any."""
    return next((name for bom, name in BOMS if head.startswith(bom)), None)


@dataclass(frozen=True)
class FileProbe:
    """What a file's bytes say before Spark reads its lines."""

    path: str
    encoding: str | None = None  # a non-UTF-8 encoding its byte-order mark declares
    error: str | None = None  # why it cannot be read to its end (truncated or corrupt)
    lines_read: int = 0  # complete lines decoded before that error

    @property
    def readable(self) -> bool:
        return self.encoding is None and self.error is None


def probe_file(spark: SparkSession, path: str) -> FileProbe:
    """Check one input file: its byte-order mark and, for a compressed file, that it
    decompresses to its end (a truncated ``.gz`` fails here, not in the middle of a job).

    Runs in the driver's JVM: the decompression is Java's, the Python side only sees the
    result. A damaged file is read a second time to count the lines before the damage.
    A Spark Connect client probes in Python (gzip, bzip2 and deflate files; other codecs are
    left to Spark's read).
    """
    if is_connect(spark):
        return _arrow.probe_file(path)
    jvm = spark.sparkContext._jvm
    fs, hpath = _fs(spark, path)
    codecs = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(
        spark.sparkContext._jsc.hadoopConfiguration()
    )
    codec = codecs.getCodec(hpath)

    def open_stream():
        raw = fs.open(hpath)
        return raw if codec is None else codec.createInputStream(raw)

    stream = open_stream()
    try:
        head = bytes(stream.readNBytes(4))
        encoding = bom_encoding(head)
        if encoding is not None or codec is None:
            return FileProbe(path, encoding)
        jvm.org.apache.commons.io.IOUtils.consume(stream)
        return FileProbe(path)
    except Exception as exc:  # py4j wraps the Java EOFException / ZipException
        error = one_line(exc)
    finally:
        _close_quietly(stream)
    return FileProbe(path, error=error, lines_read=_lines_before_error(jvm, open_stream))


def _lines_before_error(jvm, open_stream) -> int:
    stream = open_stream()
    reader = jvm.org.apache.hadoop.util.LineReader(stream)
    text, lines = jvm.org.apache.hadoop.io.Text(), 0
    try:
        while True:
            size = reader.readLine(text)
            if size == 0:
                return lines
            lines += 1
    except Exception:  # the damage: a line cut by it is never returned, so not counted
        return lines
    finally:
        _close_quietly(stream)


def _close_quietly(stream) -> None:
    # closing a damaged stream can fail again; the probe already has its answer
    with contextlib.suppress(Exception):
        stream.close()


def delete(spark: SparkSession, path: str) -> None:
    if is_connect(spark):
        return _arrow.delete(path)
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
    if is_connect(spark):
        return _arrow.exists(path)
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
        if is_connect(spark):
            _arrow.copy_tree(uri, str(staging))
        else:
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
    if is_connect(spark):
        _arrow.copy_tree(str(folder), uri)
        return
    fs, dst = _fs(spark, uri)
    source = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(str(folder))
    fs.copyFromLocalFile(False, True, source, dst)


class _Arrow:
    """The operations above through pyarrow's file systems (Spark Connect clients)."""

    @staticmethod
    def resolve(uri: str):
        from pyarrow import fs as pafs

        local = local_path(uri)
        if local is not None:
            return pafs.LocalFileSystem(), str(local.absolute())
        scheme, rest = uri.split("://", 1)
        if scheme in ("s3a", "s3n"):
            scheme = "s3"
        return pafs.FileSystem.from_uri(f"{scheme}://{rest}")

    def info(self, uri: str):
        filesystem, path = self.resolve(uri)
        return filesystem, path, filesystem.get_file_info(path)

    def exists(self, uri: str) -> bool:
        from pyarrow import fs as pafs

        return self.info(uri)[2].type != pafs.FileType.NotFound

    def list_names(self, directory: str) -> list[str]:
        from pyarrow import fs as pafs

        filesystem, path, info = self.info(directory)
        if info.type != pafs.FileType.Directory:
            return []
        return sorted(f.base_name for f in filesystem.get_file_info(pafs.FileSelector(path)))

    def rename(self, source: str, target: str) -> None:
        filesystem, src = self.resolve(source)
        filesystem.move(src, self.resolve(target)[1])

    def write_text(self, uri: str, text: str) -> None:
        filesystem, path = self.resolve(uri)
        with filesystem.open_output_stream(path, compression=None) as out:
            out.write(text.encode("utf-8"))

    def read_text(self, uri: str) -> str:
        filesystem, path = self.resolve(uri)
        with filesystem.open_input_stream(path, compression=None) as stream:
            return stream.read().decode("utf-8")

    def delete(self, uri: str) -> None:
        from pyarrow import fs as pafs

        filesystem, path, info = self.info(uri)
        if info.type == pafs.FileType.Directory:
            filesystem.delete_dir(path)
        elif info.type != pafs.FileType.NotFound:
            filesystem.delete_file(path)

    def copy_tree(self, source: str, target: str) -> None:
        from pyarrow import fs as pafs

        src_fs, src = self.resolve(source)
        dst_fs, dst = self.resolve(target)
        pafs.copy_files(src, dst, source_filesystem=src_fs, destination_filesystem=dst_fs)

    def probe_file(self, uri: str) -> FileProbe:
        import bz2
        import zlib

        decompressors = {
            ".gz": lambda: zlib.decompressobj(zlib.MAX_WBITS | 32),  # gzip, several members too
            ".bz2": bz2.BZ2Decompressor,
            ".deflate": zlib.decompressobj,
        }
        filesystem, path = self.resolve(uri)
        make = next((d for ext, d in decompressors.items() if path.endswith(ext)), None)
        if make is None:
            with filesystem.open_input_stream(path, compression=None) as stream:
                head = stream.read(4)
            return FileProbe(uri, bom_encoding(head))
        lines, head, error = 0, b"", None
        with filesystem.open_input_stream(path, compression=None) as stream:
            decompressor = make()
            try:
                while chunk := stream.read(1 << 20):
                    while chunk:
                        data = decompressor.decompress(chunk)
                        head = head or data[:4]
                        lines += data.count(b"\n")
                        # a gzip file of several members: the next member starts a new stream
                        chunk = getattr(decompressor, "unused_data", b"")
                        if chunk:
                            decompressor = make()
                if not getattr(decompressor, "eof", True):
                    raise EOFError("unexpected end of input stream")
            except (OSError, EOFError, zlib.error, ValueError) as exc:
                error = f"{type(exc).__name__}: {one_line(exc)}"  # like a Java toString()
        if error is not None:
            return FileProbe(uri, error=error, lines_read=lines)
        return FileProbe(uri, bom_encoding(head))


_arrow = _Arrow()
