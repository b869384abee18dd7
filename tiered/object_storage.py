"""Object stores for the chunked remote storage manager, selected by Aiven's ``storage.backend.class``.

* ``io.aiven.kafka.tieredstorage.storage.s3.S3Storage`` (alias ``s3``): an S3 bucket through
  boto3, with Aiven's ``storage.s3.*`` / ``storage.aws.*`` keys; objects larger than
  ``storage.s3.multipart.upload.part.size`` go up as a multipart upload.
* ``io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage`` (alias ``filesystem``):
  files under ``storage.root`` (Aiven's test/dev backend; strom's unit tests use it).

The S3 store reads chunk bodies with ``readinto`` into buffers of a :class:`BufferPool` (the
memory chunk cache hands back those it drops), counts its requests (logged at close) and
uploads each part from the chunks with one join at most.

Every method blocks; a failure is :class:`~strom.plugins.exceptions.RemoteStorageError` and a
missing object :class:`~strom.plugins.exceptions.RemoteResourceNotFoundError`.
"""

from __future__ import annotations

import http.client
import logging
import os
import tempfile
import threading
from collections import Counter, deque
from collections.abc import Generator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from strom.core.exceptions import ConfigError
from strom.plugins.exceptions import RemoteResourceNotFoundError, RemoteStorageError
from strom.tiered.config_values import ConfigReader

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client  # boto3-stubs[s3]: types only, not needed at run time

log = logging.getLogger(__name__)

S3_STORAGE_CLASS = "io.aiven.kafka.tieredstorage.storage.s3.S3Storage"
FILESYSTEM_STORAGE_CLASS = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"
BACKEND_KEY = "storage.backend.class"
BACKEND_ALIASES: Mapping[str, str] = {"s3": S3_STORAGE_CLASS, "filesystem": FILESYSTEM_STORAGE_CLASS}

MIB = 1024 * 1024
DEFAULT_PART_SIZE = 25 * MIB  # Aiven's storage.s3.multipart.upload.part.size default
MIN_PART_SIZE = 5 * MIB  # S3's smallest part but the last
MAX_POOL_CONNECTIONS = 64
BUFFER_POOL_BYTES = 64 * MIB  # chunk buffers kept for reuse (BufferPool)


class BufferPool:
    """Byte buffers of chunks, reused: a GET reads each chunk into a buffer of its exact size
    taken from here, and the memory chunk cache gives a buffer back when it drops a chunk no one
    else holds. A fresh multi-MiB buffer costs the kernel's page faults and zeroing on first
    touch, ~0.13 ms per MiB (of ~0.3 for taking a body in: bench/tiered_fetch.py), a reused one
    nothing. At most ``limit`` bytes are kept; thread-safe."""

    def __init__(self, limit: int = BUFFER_POOL_BYTES) -> None:
        self.limit = limit
        self._free: dict[int, list[bytearray]] = {}
        self._held = 0
        self._lock = threading.Lock()
        self.reused = self.allocated = 0

    def take(self, n: int) -> bytearray:
        """A buffer of ``n`` bytes (old content: the caller overwrites all of it)."""
        with self._lock:
            free = self._free.get(n)
            if free:
                self._held -= n
                self.reused += 1
                return free.pop()
            self.allocated += 1
        return bytearray(n)

    def give(self, buf: bytearray) -> None:
        """Take ``buf`` back for reuse; the caller guarantees nothing else refers to it."""
        n = len(buf)
        with self._lock:
            if self._held + n <= self.limit:
                self._free.setdefault(n, []).append(buf)
                self._held += n


class ObjectStorage(Protocol):
    """What the chunked manager needs of an object store."""

    def upload(self, key: str, parts: Iterable[bytes]) -> int:
        """Write the concatenation of ``parts`` as object ``key`` (replacing it); its size."""
        ...

    def fetch(self, key: str, first: int = 0, last: int | None = None) -> bytes:
        """Bytes ``first..last`` (inclusive; to the end when ``last`` is ``None``) of ``key``."""
        ...

    def fetch_stream(self, key: str, first: int, last: int, piece_size: int) -> Iterator[bytes]:
        """Bytes ``first..last`` (inclusive) of ``key`` in pieces of about ``piece_size``, from one
        request read as it arrives."""
        ...

    def fetch_sized(self, key: str, first: int, sizes: list[int],
                    whole_object: bool = False) -> Generator[bytes | bytearray, None, None]:
        """From byte ``first`` of ``key``, consecutive parts of exactly ``sizes`` bytes, from one
        request read as it arrives (a chunk per part: no re-joining of pieces). ``whole_object``:
        the parts are the whole object (a plain GET: no range for the server to cut)."""
        ...

    def delete(self, keys: Iterable[str]) -> None:
        """Delete the objects; a missing one is not an error."""
        ...

    def close(self) -> None:
        ...


class FileSystemStorage:
    """Objects as files under ``root`` (the key's ``/`` are directories)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise RemoteStorageError(f"object key {key!r} leaves the storage root {self.root}")
        return path

    def upload(self, key: str, parts: Iterable[bytes]) -> int:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        # Written aside and renamed, so a reader never sees half an object.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    out.write(part)
                    size += len(part)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return size

    def fetch(self, key: str, first: int = 0, last: int | None = None) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                f.seek(first)
                return f.read() if last is None else f.read(max(0, last - first + 1))
        except FileNotFoundError:
            raise RemoteResourceNotFoundError(f"object {key!r} not found under {self.root}") from None
        except OSError as e:
            raise RemoteStorageError(f"reading object {key!r}: {e}") from e

    def fetch_stream(self, key: str, first: int, last: int, piece_size: int) -> Iterator[bytes]:
        try:
            f = open(self._path(key), "rb")  # noqa: SIM115 - closed by the generator
        except FileNotFoundError:
            raise RemoteResourceNotFoundError(f"object {key!r} not found under {self.root}") from None
        with f:
            f.seek(first)
            left = last - first + 1
            while left > 0 and (piece := f.read(min(piece_size, left))):
                left -= len(piece)
                yield piece

    def fetch_sized(self, key: str, first: int, sizes: list[int],
                    whole_object: bool = False) -> Generator[bytes | bytearray, None, None]:
        try:
            f = open(self._path(key), "rb")  # noqa: SIM115 - closed by the generator
        except FileNotFoundError:
            raise RemoteResourceNotFoundError(f"object {key!r} not found under {self.root}") from None
        with f:
            f.seek(first)
            for n in sizes:
                part = f.read(n)
                if len(part) < n:
                    raise RemoteStorageError(f"object {key!r} ended early: {len(part)} of {n} bytes")
                yield part

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def close(self) -> None:
        pass


class S3Storage:
    """An S3 bucket through boto3 (any S3-compatible endpoint with ``storage.s3.endpoint.url``)."""

    def __init__(self, *, bucket: str, region: str, endpoint_url: str | None = None,
                 access_key_id: str | None = None, secret_access_key: str | None = None,
                 path_style_access: bool | None = None, part_size: int = DEFAULT_PART_SIZE) -> None:
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.part_size = part_size
        # Requests by (operation, object suffix) and the .log objects read: logged at close, so a
        # run shows its GETs per segment (bench/tiered_fetch.py prints them).
        self.requests: Counter[tuple[str, str]] = Counter()
        self.buffers = BufferPool()
        self.logs_read: set[str] = set()
        self._count_lock = threading.Lock()
        # More pooled connections than botocore's 10: the chunk fetchers, the broker's remote
        # log readers and the copier share this client, and a connection beyond the pool is
        # closed after its request (a new TCP connection per GET under load).
        # payload_signing_enabled off: botocore then never SHA-256-hashes an upload's body for
        # its signature (over https it already skips that; over http, as an S3-compatible store or
        # moto may be, it hashed every byte: most of the copier's CPU). The body's CRC32 checksum
        # (botocore's default) still guards it.
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=MAX_POOL_CONNECTIONS,
                        s3={"payload_signing_enabled": False})
        if path_style_access is not None:  # else botocore's default (virtual-hosted where it can)
            config = config.merge(Config(s3={"addressing_style": "path" if path_style_access else "virtual",
                                             "payload_signing_enabled": False}))
        self.client: S3Client = boto3.client(
            "s3", region_name=region, endpoint_url=endpoint_url, aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key, config=config)

    def _count(self, operation: str, key: str) -> None:
        suffix = key.rsplit(".", 1)[-1]
        with self._count_lock:
            self.requests[operation, suffix] += 1
            if operation == "GET" and suffix == "log":
                self.logs_read.add(key)
        log.debug("%s s3://%s/%s", operation, self.bucket, key)

    def _error(self, what: str, key: str, e: Exception) -> RemoteStorageError:
        from botocore.exceptions import ClientError

        if isinstance(e, ClientError):
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                return RemoteResourceNotFoundError(f"s3://{self.bucket}/{key} not found")
        return RemoteStorageError(f"{what} s3://{self.bucket}/{key} failed: {e}")

    def upload(self, key: str, parts: Iterable[bytes]) -> int:
        from botocore.exceptions import BotoCoreError, ClientError

        pending = _PartBuffer()
        size = 0
        upload_id: str | None = None
        done: list[dict[str, object]] = []
        try:
            for chunk in parts:
                pending.add(chunk)
                size += len(chunk)
                while pending.size >= self.part_size * 2 or (upload_id is None and pending.size > self.part_size):
                    # More than one part's worth: from here on this object is a multipart upload.
                    if upload_id is None:
                        self._count("CreateMultipartUpload", key)
                        upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
                    self._put_part(key, upload_id, done, pending.take(self.part_size))
            if upload_id is None:
                self._count("PUT", key)
                self.client.put_object(Bucket=self.bucket, Key=key, Body=pending.take(pending.size))
                return size
            while pending.size:
                # The last part may be small; one short of two parts' worth stays one part.
                take = pending.size if pending.size < 2 * self.part_size else self.part_size
                self._put_part(key, upload_id, done, pending.take(take))
            self.client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                  MultipartUpload={"Parts": done})  # type: ignore[typeddict-item]
            log.debug("uploaded s3://%s/%s in %d parts (%d bytes)", self.bucket, key, len(done), size)
            return size
        except (BotoCoreError, ClientError) as e:
            if upload_id is not None:
                self._abort(key, upload_id)
            raise self._error("upload of", key, e) from e
        except BaseException:
            if upload_id is not None:
                self._abort(key, upload_id)
            raise

    def _put_part(self, key: str, upload_id: str, done: list[dict[str, object]], body: bytes) -> None:
        number = len(done) + 1
        self._count("UploadPart", key)
        etag = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                       Body=body)["ETag"]
        done.append({"ETag": etag, "PartNumber": number})

    def _abort(self, key: str, upload_id: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        except (BotoCoreError, ClientError) as e:  # the upload's own error is the one to report
            log.warning("aborting multipart upload of s3://%s/%s failed: %s", self.bucket, key, e)

    def fetch(self, key: str, first: int = 0, last: int | None = None) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        rng = f"bytes={first}-" if last is None else f"bytes={first}-{last}"
        self._count("GET", key)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key, Range=rng)["Body"]
            try:
                return body.read()
            finally:
                body.close()
        except (BotoCoreError, ClientError) as e:
            raise self._error("read of", key, e) from e

    def fetch_stream(self, key: str, first: int, last: int, piece_size: int) -> Iterator[bytes]:
        from botocore.exceptions import BotoCoreError, ClientError

        self._count("GET", key)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={first}-{last}")["Body"]
        except (BotoCoreError, ClientError) as e:
            raise self._error("read of", key, e) from e
        try:
            yield from body.iter_chunks(piece_size)
        except (BotoCoreError, ClientError) as e:
            raise self._error("read of", key, e) from e
        finally:
            body.close()

    def fetch_sized(self, key: str, first: int, sizes: list[int],
                    whole_object: bool = False) -> Generator[bytes | bytearray, None, None]:
        from botocore.exceptions import BotoCoreError, ClientError

        self._count("GET", key)
        try:
            if whole_object:
                body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            else:
                body = self.client.get_object(Bucket=self.bucket, Key=key,
                                              Range=f"bytes={first}-{first + sum(sizes) - 1}")["Body"]
        except (BotoCoreError, ClientError) as e:
            raise self._error("read of", key, e) from e
        raw = _plain_http_response(body)
        try:
            for n in sizes:
                if raw is not None:
                    part: bytes | bytearray = _read_exactly(raw, n, self.buffers)
                else:
                    part = body.read(n)
                if len(part) < n:
                    raise RemoteStorageError(f"s3://{self.bucket}/{key} ended early: {len(part)} of {n} bytes")
                yield part
            if raw is not None and raw.isclosed():
                # Read to its end: the connection goes back to urllib3's pool (close() would drop it).
                getattr(body, "_raw_stream").release_conn()  # noqa: B009 - private to botocore
        except (BotoCoreError, ClientError, OSError, http.client.HTTPException) as e:
            raise self._error("read of", key, e) from e
        finally:
            body.close()

    def delete(self, keys: Iterable[str]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        wanted = list(keys)
        for i in range(0, len(wanted), 1000):  # DeleteObjects takes at most 1000 keys
            batch = wanted[i:i + 1000]
            try:
                out = self.client.delete_objects(Bucket=self.bucket, Delete={
                    "Objects": [{"Key": k} for k in batch], "Quiet": True})
            except (BotoCoreError, ClientError) as e:
                raise self._error("delete of", batch[0], e) from e
            errors = out.get("Errors") or []
            if errors:
                raise RemoteStorageError(f"deleting from s3://{self.bucket} failed: {errors}")

    def close(self) -> None:
        with self._count_lock:
            counts = ", ".join(f"{op} {suffix} {n}" for (op, suffix), n in sorted(self.requests.items()))
            segments = len(self.logs_read)
            gets = sum(n for (op, _), n in self.requests.items() if op == "GET")
        if counts:
            log.info("S3 requests: %s; %d segments read, %.1f GETs per segment read; chunk buffers: %d reused, "
                     "%d allocated", counts, segments, gets / segments if segments else 0.0, self.buffers.reused,
                     self.buffers.allocated)
        self.client.close()


class _PartBuffer:
    """An upload's chunks held until a part's worth: each part is joined once from them (one
    copy; a part that is one whole chunk, as a small object is, none). Appending to one
    bytearray and cutting parts off its front copied every byte three times."""

    def __init__(self) -> None:
        self._pieces: deque[bytes | memoryview] = deque()
        self.size = 0

    def add(self, data: bytes) -> None:
        if data:
            self._pieces.append(data)
            self.size += len(data)

    def take(self, n: int) -> bytes:
        """The first ``n`` bytes held (``n`` <= size)."""
        if self._pieces and len(self._pieces[0]) == n and isinstance(self._pieces[0], bytes):
            self.size -= n
            return self._pieces.popleft()  # type: ignore[return-value]  # checked: bytes
        out: list[bytes | memoryview] = []
        got = 0
        while got < n:
            piece = self._pieces[0]
            if len(piece) <= n - got:
                out.append(self._pieces.popleft())
                got += len(piece)
            else:
                view = memoryview(piece)
                out.append(view[:n - got])
                self._pieces[0] = view[n - got:]
                got = n
        self.size -= n
        return b"".join(out)


def _plain_http_response(body: object) -> http.client.HTTPResponse | None:
    """The ``http.client`` response under a botocore body, when its bytes are the object's as
    sent (no content decoding): read with ``readinto`` straight into the chunk's own buffer, it
    costs one copy from the socket instead of the three of ``StreamingBody.read`` (http.client's
    bytearray, its ``bytes`` copy, urllib3's buffer), and fresh pages once instead of thrice.
    ``None`` (read through botocore) for any other body."""
    stream = getattr(body, "_raw_stream", None)
    fp = getattr(stream, "_fp", None)
    headers = getattr(stream, "headers", None)
    if not isinstance(fp, http.client.HTTPResponse) or headers is None or headers.get("content-encoding"):
        return None
    return fp


def _read_exactly(raw: http.client.HTTPResponse, n: int, pool: BufferPool) -> bytearray:
    """``n`` bytes of ``raw`` (fewer only at its end), in one buffer (from ``pool``) filled in place."""
    buf = pool.take(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = raw.readinto(view[got:])
        if not k:
            break
        got += k
    view.release()
    if got < n:
        del buf[got:]
    return buf


def object_storage_from_config(reader: ConfigReader) -> ObjectStorage:
    """The backend ``storage.backend.class`` names, built from its ``storage.*`` keys."""
    configured = reader.string(BACKEND_KEY, S3_STORAGE_CLASS)
    backend = BACKEND_ALIASES.get(configured, configured)
    if backend == FILESYSTEM_STORAGE_CLASS:
        return FileSystemStorage(Path(reader.string("storage.root")))
    if backend != S3_STORAGE_CLASS:
        raise ConfigError(reader.prefix + BACKEND_KEY, configured,
                          f"{S3_STORAGE_CLASS} (or s3) or {FILESYSTEM_STORAGE_CLASS} (or filesystem)")
    endpoint = reader.optional_string("storage.s3.endpoint.url")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise ConfigError(reader.prefix + "storage.s3.endpoint.url", endpoint, "an http:// or https:// URL")
    key_id = reader.optional_string("storage.aws.access.key.id")
    secret = reader.optional_string("storage.aws.secret.access.key")
    if (key_id is None) != (secret is None):
        missing = "storage.aws.secret.access.key" if secret is None else "storage.aws.access.key.id"
        raise ConfigError(reader.prefix + missing, None,
                          "a value: storage.aws.access.key.id and storage.aws.secret.access.key go together")
    return S3Storage(
        bucket=reader.string("storage.s3.bucket.name"), region=reader.string("storage.s3.region"),
        endpoint_url=endpoint, access_key_id=key_id, secret_access_key=secret,
        path_style_access=reader.boolean("storage.s3.path.style.access.enabled", None),
        part_size=reader.integer("storage.s3.multipart.upload.part.size", DEFAULT_PART_SIZE,
                                 minimum=MIN_PART_SIZE, maximum=2**31 - 1))
