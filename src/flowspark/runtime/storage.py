"""Where flowspark's own files live: local paths or filesystem URIs, one layer for all.

A recovery directory or a file connector's path is a plain local path or a URI
(``file://``, ``s3a://``, ``hdfs://``, ``gs://``, ``abfs://``). Spark's Hadoop
filesystem writes the query's checkpoint there; everything flowspark writes or reads
itself (sink snapshots, the run token, file inputs' bytes, on the driver and on the
executors) goes through this module, which opens the same URI with **pyarrow's
filesystems**. Why pyarrow and not Spark's Hadoop ``FileSystem``: the executors'
Python workers (and a Spark Connect client) have no JVM gateway, and pyarrow is
already how flowspark moves rows; the scheme names are Hadoop's (``s3a``) so that
one string serves both.

Configuration is the filesystem's usual one (``AWS_*`` variables for S3, the
Hadoop client for HDFS); a URI's query string passes options to pyarrow
(``s3a://bucket/dir?endpoint_override=host:9000&scheme=http``) and is not part of
the path.

>>> loc = Location.parse("/tmp/flowspark-doc/run")
>>> loc.is_local, loc.scheme, loc.path
(True, 'file', '/tmp/flowspark-doc/run')
>>> loc.child("sinks", "out.pickle").uri
'/tmp/flowspark-doc/run/sinks/out.pickle'
>>> Location.parse("s3a://bucket/ckpt").child("x").uri
's3a://bucket/ckpt/x'
>>> try:
...     Location.parse("ftp://host/dir")
... except StorageError as exc:
...     print(str(exc).split(" (")[0])
ftp://host/dir: no filesystem for ftp://
"""

from __future__ import annotations

import fnmatch
import io
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = ["Location", "StorageError", "read_bytes", "write_bytes_atomic"]

# Hadoop's scheme -> pyarrow's.
_ARROW_SCHEMES = {
    "file": "file",
    "s3a": "s3",
    "s3n": "s3",
    "s3": "s3",
    "gs": "gs",
    "gcs": "gs",
    "hdfs": "hdfs",
    "viewfs": "hdfs",
    "abfs": "abfs",
    "abfss": "abfs",
}
_SUPPORTED = "local paths, file://, s3a://, s3://, gs://, hdfs://, abfs://"


class StorageError(ValueError):
    """A location that is malformed, has no filesystem here, or cannot be reached."""


@dataclass(frozen=True)
class Location:
    """A file or directory: a local path, or a URI of a remote filesystem.

    ``uri`` is what the user gave without its query (a local path made absolute);
    ``path`` is the filesystem's own path (``bucket/key`` for S3); ``query`` the
    URI's options for pyarrow. ``spec`` (URI and query) parses back to the same
    location in another process.
    """

    uri: str
    scheme: str
    authority: str
    path: str
    query: str = ""

    @classmethod
    def parse(cls, where: str | os.PathLike[str] | Location) -> Location:
        """A location from a path or URI; raises :class:`StorageError` for an
        unknown scheme or a URI without a path."""
        if isinstance(where, Location):
            return where
        text = os.fspath(where)
        if "://" not in text:
            absolute = str(Path(text).absolute())
            return cls(absolute, "file", "", absolute)
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme not in _ARROW_SCHEMES:
            raise StorageError(
                f"{text}: no filesystem for {scheme}:// (flowspark reads and writes {_SUPPORTED})"
            )
        if scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise StorageError(
                    f"{text}: a file:// URI names a path on this machine; got host {parts.netloc!r}"
                )
            path = parts.path or "/"
            return cls(path, "file", "", path)
        if _ARROW_SCHEMES[scheme] in ("s3", "gs"):
            bucket = parts.hostname or ""
            if not bucket:
                raise StorageError(f"{text}: no bucket in the URI")
            path = (bucket + parts.path).rstrip("/")
        else:
            path = parts.path.rstrip("/") or "/"
        uri = text.split("?", 1)[0].rstrip("/")
        return cls(uri, scheme, parts.netloc, path, parts.query)

    @property
    def is_local(self) -> bool:
        """Whether this is a path on this machine's filesystem (or a mount of it)."""
        return self.scheme == "file"

    @property
    def local_path(self) -> Path:
        """The path on this machine; only for local locations."""
        if not self.is_local:
            raise StorageError(f"{self.shown} is not on a local filesystem")
        return Path(self.path)

    @property
    def name(self) -> str:
        """The last component of the path."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def child(self, *names: str) -> Location:
        """The location of ``names`` under this one."""
        suffix = "/".join(n.strip("/") for n in names if n)
        join = (lambda a: f"{a.rstrip('/')}/{suffix}") if suffix else (lambda a: a)
        return Location(join(self.uri), self.scheme, self.authority, join(self.path), self.query)

    def bucket(self) -> Location | None:
        """The bucket of an object store's location (``None`` elsewhere).

        >>> Location.parse("s3a://b/dir/x").bucket().path
        'b'
        """
        if _ARROW_SCHEMES[self.scheme] not in ("s3", "gs"):
            return None
        name = self.path.split("/", 1)[0]
        head = self.uri.split("://", 1)[0] + "://" + self.authority
        return Location(head, self.scheme, self.authority, name, self.query)

    @property
    def spec(self) -> str:
        """The URI with its query: what to hand to another process."""
        return f"{self.uri}?{self.query}" if self.query else self.uri

    @property
    def options(self) -> tuple[tuple[str, str], ...]:
        """The query's options, in order."""
        return tuple(parse_qsl(self.query))

    def for_spark(self) -> str:
        """The string Spark's Hadoop filesystem is given (a checkpoint location)."""
        return self.path if self.is_local else self.uri

    @property
    def shown(self) -> str:
        """The URI for messages: without the keys of a ``user:secret@`` part."""
        head, sep, tail = self.uri.partition("://")
        if sep and "@" in tail.split("/", 1)[0]:
            return f"{head}://***@{tail.split('@', 1)[1]}"
        return self.uri

    def __str__(self) -> str:
        return self.shown

    # -- the filesystem ----------------------------------------------------

    def filesystem(self) -> Any:
        """The pyarrow filesystem that serves this location (cached per process)."""
        return _filesystem(self.scheme, self.authority, self.options)

    def info(self) -> Any:
        """pyarrow's ``FileInfo`` (``.type``, ``.size``); a filesystem that cannot be
        reached raises :class:`StorageError` naming the location."""
        try:
            return self.filesystem().get_file_info(self.path)
        except StorageError:
            raise
        except Exception as exc:
            raise StorageError(f"{self.shown}: cannot reach it: {_one_line(exc)}") from exc

    def is_file(self) -> bool:
        """Whether a file is there."""
        import pyarrow.fs as pafs  # noqa: PLC0415 pyarrow.fs: remote storage only

        return bool(self.info().type == pafs.FileType.File)

    def is_dir(self) -> bool:
        """Whether a directory is there (on object stores: any key below it)."""
        import pyarrow.fs as pafs  # noqa: PLC0415 pyarrow.fs: remote storage only

        return bool(self.info().type == pafs.FileType.Directory)

    def exists(self) -> bool:
        """Whether anything is there."""
        import pyarrow.fs as pafs  # noqa: PLC0415 pyarrow.fs: remote storage only

        return bool(self.info().type != pafs.FileType.NotFound)

    def size(self) -> int:
        """The size of the file, in bytes."""
        if self.is_local:
            return os.path.getsize(self.path)
        info = self.info()
        if info.size is None:
            raise StorageError(f"{self.shown}: not a file")
        return int(info.size)

    def make_dirs(self) -> None:
        """Create this directory and its parents (object stores need none)."""
        if self.is_local:
            Path(self.path).mkdir(parents=True, exist_ok=True)
            return
        try:
            self.filesystem().create_dir(self.path, recursive=True)
        except Exception as exc:
            raise StorageError(f"{self.shown}: cannot create it: {_one_line(exc)}") from exc

    def files(self, pattern: str = "*") -> list[str]:
        """Names (relative to this directory, ``/``-separated) of the files below it
        whose relative name matches ``pattern`` (as :meth:`pathlib.Path.glob` does,
        ``**`` crossing directories), sorted."""
        if self.is_local:
            root = Path(self.path)
            return sorted(str(p.relative_to(root)) for p in root.glob(pattern) if p.is_file())
        import pyarrow.fs as pafs  # noqa: PLC0415 pyarrow.fs: remote storage only

        recursive = "**" in pattern or "/" in pattern
        selector = pafs.FileSelector(self.path, recursive=recursive, allow_not_found=True)
        try:
            found = self.filesystem().get_file_info(selector)
        except Exception as exc:
            raise StorageError(f"{self.shown}: cannot list it: {_one_line(exc)}") from exc
        base = self.path.rstrip("/") + "/"
        names = [
            info.path[len(base) :]
            for info in found
            if info.type == pafs.FileType.File and info.path.startswith(base)
        ]
        return sorted(n for n in names if _glob_match(n, pattern))

    def delete_file(self) -> None:
        """Remove the file (nothing to do when there is none)."""
        if self.is_local:
            Path(self.path).unlink(missing_ok=True)
            return
        try:
            self.filesystem().delete_file(self.path)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise StorageError(f"{self.shown}: cannot delete it: {_one_line(exc)}") from exc

    def open_read(self) -> io.BufferedReader:
        """A seekable binary reader of the file."""
        if self.is_local:
            return open(self.path, "rb")  # noqa: SIM115 - the caller closes it
        try:
            raw = self.filesystem().open_input_file(self.path)
        except Exception as exc:
            raise StorageError(f"{self.shown}: cannot open it: {_one_line(exc)}") from exc
        return io.BufferedReader(raw, buffer_size=1 << 20)


def read_bytes(location: Location) -> bytes | None:
    """The file's bytes, or None if there is no file."""
    if location.is_local:
        try:
            return Path(location.path).read_bytes()
        except FileNotFoundError:
            return None
    if not location.is_file():
        return None
    with location.filesystem().open_input_stream(location.path) as f:
        return bytes(f.read())


def write_bytes_atomic(location: Location, data: bytes) -> None:
    """Replace the file with ``data`` so that a reader sees the old or the new bytes,
    never a part: a local file is written beside, synced and renamed; an object
    store's put is atomic; HDFS and others write beside and move. The file beside
    has a name of its own per write, so that writers racing for one file (runs
    taking a recovery directory's lease) do not write into each other's."""
    unique = f".{os.getpid()}-{os.urandom(4).hex()}.tmp"
    if location.is_local:
        path = Path(location.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + unique)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
        return
    fs = location.filesystem()
    arrow_scheme = _ARROW_SCHEMES[location.scheme]
    try:
        if arrow_scheme in ("s3", "gs"):
            with fs.open_output_stream(location.path) as f:
                f.write(data)
            return
        parent = location.path.rsplit("/", 1)[0]
        fs.create_dir(parent, recursive=True)
        beside = location.path + unique
        with fs.open_output_stream(beside) as f:
            f.write(data)
        fs.move(beside, location.path)
    except Exception as exc:
        raise StorageError(f"{location.shown}: cannot write it: {_one_line(exc)}") from exc


# -- pyarrow filesystems, one per (scheme, authority, options) in a process ----------

_FILESYSTEMS: dict[tuple[str, str, tuple[tuple[str, str], ...]], Any] = {}
_LOCK = threading.Lock()


def _filesystem(scheme: str, authority: str, options: tuple[tuple[str, str], ...]) -> Any:
    key = (scheme, authority, options)
    with _LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is None:
            fs = _FILESYSTEMS[key] = _open_filesystem(scheme, authority, options)
    return fs


def _open_filesystem(scheme: str, authority: str, options: tuple[tuple[str, str], ...]) -> Any:
    import pyarrow.fs as pafs  # noqa: PLC0415 pyarrow.fs: remote storage only

    arrow_scheme = _ARROW_SCHEMES[scheme]
    if arrow_scheme == "file":
        return pafs.LocalFileSystem()
    host = authority.rsplit("@", 1)[-1]
    try:
        if arrow_scheme == "s3":
            return pafs.S3FileSystem(**_s3_options(authority, options))
    except StorageError:
        raise
    except Exception as exc:
        raise StorageError(
            f"{scheme}://{host}: pyarrow cannot open this filesystem here: {_one_line(exc)}"
        ) from exc
    try:
        query = "&".join(f"{k}={v}" for k, v in options)
        fs, _ = pafs.FileSystem.from_uri(
            f"{arrow_scheme}://{authority}/" + (f"?{query}" if query else "")
        )
    except Exception as exc:
        hint = (
            " (pyarrow's HDFS client needs JAVA_HOME, Hadoop's libhdfs (ARROW_LIBHDFS_DIR) "
            "and the Hadoop client's CLASSPATH on every machine that reads or writes there)"
            if arrow_scheme == "hdfs"
            else ""
        )
        raise StorageError(
            f"{scheme}://{host}: pyarrow cannot open this filesystem here: {_one_line(exc)}{hint}"
        ) from exc
    return fs


def _s3_options(authority: str, options: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """pyarrow ``S3FileSystem`` arguments: keys from the URI's user info, options from
    its query, the endpoint from ``$AWS_ENDPOINT_URL_S3``/``$AWS_ENDPOINT_URL`` as
    the AWS tools read it; the rest from the AWS SDK's usual environment."""
    kwargs: dict[str, Any] = {}
    if "@" in authority:
        user = authority.rsplit("@", 1)[0]
        kwargs["access_key"], _, kwargs["secret_key"] = user.partition(":")
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint)
        kwargs["endpoint_override"] = parts.netloc or parts.path
        if parts.scheme:
            kwargs["scheme"] = parts.scheme
    known = {
        "endpoint_override",
        "scheme",
        "region",
        "access_key",
        "secret_key",
        "session_token",
        "anonymous",
        "force_virtual_addressing",
    }
    for key, value in options:
        if key not in known:
            raise StorageError(
                f"s3 option {key!r} is not one flowspark passes on "
                f"(known: {', '.join(sorted(known))})"
            )
        kwargs[key] = (
            value.lower() in ("1", "true", "yes")
            if key in ("anonymous", "force_virtual_addressing")
            else value
        )
    return kwargs


def _glob_match(name: str, pattern: str) -> bool:
    """``Path.glob``-like matching of a relative name: ``**/`` spans directories,
    other wildcards stay within one."""
    if "**" in pattern:
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(
            name, pattern.replace("**/", "")
        )
    return name.count("/") == pattern.count("/") and fnmatch.fnmatchcase(name, pattern)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
