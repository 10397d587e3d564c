"""Small file-system operations on any Spark URI.

A classic session goes through Hadoop's FileSystem API in the driver's JVM (the file systems
and credentials Spark itself is configured with). A Spark Connect client has no JVM in its
process: it goes through pyarrow's file systems instead (local paths and ``file:``, ``s3a://``
as ``s3://``, ``hdfs://``, ``gs://``), which the client must be able to reach.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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


# Compressed formats by their first bytes (magic numbers).
MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x04\x22\x4d\x18", "LZ4 frame"),
    (b"\xff\x06\x00\x00sNaPpY", "Snappy frame"),
)
PARQUET_MAGIC = b"PAR1"  # a Parquet file's first (and last) bytes
# Hadoop's codecs by file extension (how Spark's text source picks one) and the format each
# expects at a file's start; .deflate (zlib), .lz4 and .snappy (Hadoop's block formats) have
# no magic number of their own
CODECS = {
    ".gz": "gzip",
    ".bz2": "bzip2",
    ".zst": "zstd",
    ".deflate": None,
    ".lz4": None,
    ".snappy": None,
}
# what the probe decompresses itself (Java's or Python's codecs); the other codecs' files are
# decompressed by a Spark read of the file, after a check of the block headers where there are
BLOCK_FORMATS = (".lz4", ".snappy")
STREAMED = (".gz", ".bz2", ".deflate")


def codec_extension(name: str) -> str | None:
    """The Hadoop codec extension a file name ends with (``None``: read as plain text)."""
    return next((ext for ext in CODECS if name.endswith(ext)), None)


def compression_mismatch(name: str, extension: str | None, head: bytes) -> str | None:
    r"""Why a file's first bytes cannot be what Spark reads it as: compressed data in a file read
    as plain text (an ``.xz`` export, a gzip file named ``.json``) or by another codec (an LZ4
    frame file named ``.lz4``, which Hadoop's codec reads as its own block format).

    >>> compression_mismatch("p.json", None, b"\x1f\x8b\x08\x00")
    'gzip-compressed data in p.json, which is read as plain text (no codec for its name)'
    >>> compression_mismatch("p.jsonl.lz4", ".lz4", b"\x04\x22\x4d\x18\x64")
    "LZ4 frame-compressed data in p.jsonl.lz4, which is read with Hadoop's .lz4 codec"
    >>> compression_mismatch("p.jsonl.gz", ".gz", b"\x1f\x8b\x08\x00") is None
    True
    """
    found = next((fmt for magic, fmt in MAGIC if head.startswith(magic)), None)
    if found is None or (extension is not None and CODECS.get(extension) == found):
        return None
    reader = (
        "read as plain text (no codec for its name)"
        if extension is None
        else f"read with Hadoop's {extension} codec"
    )
    return f"{found}-compressed data in {name.rsplit('/', 1)[-1]}, which is {reader}"


def block_framing_error(read_at, size: int, extension: str) -> str | None:
    """Why a file is not in the block format of Hadoop's ``.lz4`` / ``.snappy`` codecs: blocks
    of [uncompressed length, compressed length, compressed bytes] (4-byte big-endian lengths,
    one chunk per block as Hadoop writes them) that end exactly at the file's end. Checked
    before Spark decompresses the file: its codec allocates whatever a header claims, and a
    foreign or damaged file's first bytes can claim gigabytes (the driver then dies of
    OutOfMemoryError). ``read_at(offset, n)`` returns up to ``n`` bytes.

    >>> import struct
    >>> block = struct.pack(">II", 10, 3) + b"abc"
    >>> data = block * 2
    >>> block_framing_error(lambda at, n: data[at : at + n], len(data), ".lz4") is None
    True
    >>> block_framing_error(lambda at, n: data[at : at + n], len(data) - 1, ".lz4")
    "not Hadoop's .lz4 block format: the block at byte 11 claims 3 compressed bytes, 2 remain"
    """
    import struct

    at = 0
    while at < size:
        header = read_at(at, 8)
        if len(header) < 8:
            return f"not Hadoop's {extension} block format: a block header cut at byte {at:,}"
        _, compressed = struct.unpack(">II", header)
        left = size - at - 8
        if compressed == 0 or compressed > left:
            return (
                f"not Hadoop's {extension} block format: the block at byte {at:,} claims "
                f"{compressed:,} compressed bytes, {left:,} remain"
            )
        at += 8 + compressed
    return None


def probe_by_reading(path: str, read: Callable[[], object]) -> FileProbe:
    """A file checked by reading it whole with Spark (``read()``, one job): for codecs the
    probe has no decoder of its own for, and for Parquet inputs. A failure is the file's,
    reported like a damaged stream (the lines before it unknown)."""
    try:
        read()
    except Exception as exc:  # pyspark's or Spark Connect's wrapper of the read's failure
        return FileProbe(path, error=one_line(exc))
    return FileProbe(path)


# Input files probed at once (``probe_each``): a gzip file is decompressed in the driver's JVM,
# a Parquet file read by a Spark job of its own; one at a time, an export of thousands of
# files waited on each in turn while the driver's other cores and the cluster sat idle.
PROBE_THREADS = max(2, min(16, os.cpu_count() or 1))
PROBE_PROGRESS_FILES = 50


def probe_each(
    probe: Callable[[str], FileProbe],
    paths: list[str],
    threads: int | None = None,
    report: Callable[[str], None] | None = None,
) -> list[FileProbe]:
    """``probe(path)`` of every path, ``threads`` (default ``PROBE_THREADS``) at a time; the
    probes in the paths' order. From PROBE_PROGRESS_FILES files on, ``report`` (default: a
    line on stderr; a job passes its ``JobRun.info``) hears at every tenth how far they are:
    the probes of a large export take minutes before the job reads."""
    threads = PROBE_THREADS if threads is None else threads
    if threads < 2 or len(paths) < 2:
        return _reported(map(probe, paths), len(paths), 1, report)
    with ThreadPoolExecutor(min(threads, len(paths)), thread_name_prefix="probe") as pool:
        return _reported(pool.map(probe, paths), len(paths), threads, report)


def _reported(probes, total: int, threads: int, report) -> list[FileProbe]:
    report = report or (lambda line: print(line, file=sys.stderr, flush=True))
    done, step = [], max(1, total // 10)
    for probe in probes:
        done.append(probe)
        if total >= PROBE_PROGRESS_FILES and (len(done) % step == 0 or len(done) == total):
            report(f"probed {len(done):,} of {total:,} files ({threads} at once)")
    return done


def probe_file(spark: SparkSession, path: str) -> FileProbe:
    """Check one input file before Spark reads its lines, so that a damaged or foreign file is
    left out (and quarantined by the caller) instead of failing the job or turning into
    garbage: compressed data the file's name does not announce, Parquet data (read as Parquet
    only when named ``*.parquet``); for a compressed file, that it
    decompresses to its end (a truncated ``.gz`` fails here, not in the middle of a job);
    the byte-order mark of a plain, gzip, bzip2 or deflate file.

    Runs in the driver's JVM: the decompression is Java's, the Python side only sees the
    result; a damaged file is read a second time to count the lines before the damage.
    A Spark Connect client probes in Python (gzip, bzip2 and deflate). Other codecs (zstd,
    Hadoop's lz4 and snappy) are decompressed by a Spark read of the file, after the block
    headers of lz4 and snappy files are checked against the file's size.
    """
    if is_connect(spark):
        return _arrow.probe_file(spark, path)
    jvm = spark.sparkContext._jvm
    fs, hpath = _fs(spark, path)
    codecs = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(
        spark.sparkContext._jsc.hadoopConfiguration()
    )
    codec = codecs.getCodec(hpath)
    extension = None if codec is None else str(codec.getDefaultExtension())
    raw = fs.open(hpath)
    try:

        def read_at(offset: int, n: int) -> bytes:
            raw.seek(offset)
            return bytes(raw.readNBytes(n))

        head = read_at(0, 10)
        first = _foreign_or_damaged(
            path, extension, head, read_at, fs.getFileStatus(hpath).getLen()
        )
    finally:
        _close_quietly(raw)
    if first is not None:
        return first
    if codec is None:  # plain text: its first bytes are the text's
        return FileProbe(path, bom_encoding(head))
    if extension not in STREAMED:
        return probe_by_reading(path, lambda: spark.read.text(path).count())

    def open_stream():
        stream = fs.open(hpath)
        try:
            return codec.createInputStream(stream)  # bzip2 reads its first block here
        except Exception:
            _close_quietly(stream)
            raise

    stream = None
    try:
        stream = open_stream()
        head = bytes(stream.readNBytes(4))
        encoding = bom_encoding(head)
        if encoding is not None:
            return FileProbe(path, encoding)
        jvm.org.apache.commons.io.IOUtils.consume(stream)
        return FileProbe(path)
    except Exception as exc:  # py4j wraps the Java EOFException / ZipException
        error = one_line(exc)
    finally:
        if stream is not None:
            _close_quietly(stream)
    return FileProbe(path, error=error, lines_read=_lines_before_error(jvm, open_stream))


def _foreign_or_damaged(
    path: str, extension: str | None, head: bytes, read_at, size: int
) -> FileProbe | None:
    """The probe of a file its first bytes (``head``) or block headers already rule out, else
    None."""
    error = compression_mismatch(path, extension, head)
    if error is None and head.startswith(PARQUET_MAGIC):
        error = (
            f"Parquet data in {path.rsplit('/', 1)[-1]}, which is read as JSON lines "
            "(only files named *.parquet are read as Parquet)"
        )
    if error is None and extension in BLOCK_FORMATS:
        error = block_framing_error(read_at, size, extension)
    return None if error is None else FileProbe(path, error=error)


def _lines_before_error(jvm, open_stream) -> int:
    try:
        stream = open_stream()
    except Exception:  # damaged in its first block: no line before the damage
        return 0
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


def no_lake_folder(lake: str) -> str | None:
    """Why ``lake`` cannot be a lake root, checked before Spark starts: a local path (or
    ``file:`` URI) with no folder there; None otherwise (other schemes are Spark's to read)."""
    local = local_path(lake)
    if local is not None and not local.is_dir():
        return f"no lake at {lake} (no such folder; --lake names the lake root)"
    return None


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

    def probe_file(self, spark: SparkSession, uri: str) -> FileProbe:
        import bz2
        import zlib

        decompressors = {
            ".gz": lambda: zlib.decompressobj(zlib.MAX_WBITS | 32),  # gzip, several members too
            ".bz2": bz2.BZ2Decompressor,
            ".deflate": zlib.decompressobj,
        }
        filesystem, path = self.resolve(uri)
        extension = codec_extension(path)
        with filesystem.open_input_file(path) as raw:
            head = raw.read_at(10, 0)
            first = _foreign_or_damaged(
                uri, extension, head, lambda at, n: raw.read_at(n, at), raw.size()
            )
        if first is not None:
            return first
        if extension is None:  # plain text: its first bytes are the text's
            return FileProbe(uri, bom_encoding(head))
        make = decompressors.get(extension)
        if make is None:
            return probe_by_reading(uri, lambda: spark.read.text(uri).count())
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
