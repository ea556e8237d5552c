"""gzip bodies, decompressed with a cap so a small bomb cannot expand without bound."""

import gzip
import zlib


class GzipError(ValueError):
    """The data is not a complete, valid gzip stream."""


class DecompressedTooLarge(ValueError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"decompressed body exceeds {limit} bytes")
        self.limit = limit


GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(data: bytes) -> bool:
    return data[:2] == GZIP_MAGIC


def decompress(data: bytes, limit: int) -> bytes:
    """Every member of a gzip stream, concatenated; at most ``limit`` bytes of output."""
    output: list[bytes] = []
    produced = 0
    remaining = data
    while remaining:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = decompressor.decompress(remaining, limit - produced + 1)
        except zlib.error as exc:
            raise GzipError(f"invalid gzip data: {exc}") from exc
        produced += len(chunk)
        if produced > limit or decompressor.unconsumed_tail:
            raise DecompressedTooLarge(limit)
        if not decompressor.eof:
            raise GzipError("truncated gzip data")
        output.append(chunk)
        remaining = decompressor.unused_data
    return b"".join(output)


def compress(data: bytes, level: int) -> bytes:
    # mtime=0 makes the output a function of the input alone (stable ETags and archives).
    return gzip.compress(data, compresslevel=level, mtime=0)
