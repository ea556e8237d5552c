"""gzip bodies, decompressed with a cap so a small bomb cannot expand without bound; large
files compressed for storage.

zlib-ng, not zlib, reads every gzip stream and writes the archive's: the same format, written
and read 1.5-3x as fast (a 1 MB save inflated in 0.65 ms, not 1.9). Stored files are written
by ISA-L (``isal``), whose level 2 makes a 1 MB save 5.4x smaller in 1.5 ms where zlib-ng's
level 2 takes 3.7 ms for the same size and its level 1 1.8 ms for 4.0x (10 MB: 15 ms against
35 and 18), measured side by side on the benchmark's saves. ISA-L has no levels past 3, so
the archive, written once per export at level 6, stays with zlib-ng. Either library's bytes
differ from zlib's, but are still a function of the data, the level and the library's
version: a stored file is compressed once, and its ETag is the uncompressed file's.
"""

import io

from isal import isal_zlib
from zlib_ng import zlib_ng

# zlib-ng's stub declares its error an instance of Exception; it is the exception class.
_ZlibError: type[Exception] = zlib_ng.error  # type: ignore[assignment]
# A gzip wrapper, as deflate writes it: no name, no time (the same data, the same bytes).
GZIP_WBITS = 16 + zlib_ng.MAX_WBITS


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
    """Every member of a gzip stream, concatenated; at most ``limit`` bytes of output.

    zlib-ng's reader walks the members in C, over the data once. Read one member at a time
    here, each member's rest of the stream was copied (``unused_data``): 200,000 empty
    members in a 4 MB body took 34 s (2026-11-27)."""
    reader = zlib_ng._GzipReader(io.BytesIO(data))
    output: list[bytes] = []
    produced = 0
    try:
        while chunk := reader.read(limit + 1 - produced):
            output.append(chunk)
            produced += len(chunk)
            if produced > limit:
                raise DecompressedTooLarge(limit)
    except EOFError as exc:
        # zlib-ng's reader says the same of a member cut short and of bytes after a member
        # that do not start another.
        raise GzipError("a member is cut short, or what follows one is not a member") from exc
    except (_ZlibError, OSError) as exc:  # OSError: gzip's BadGzipFile
        raise GzipError(f"invalid gzip data: {exc}") from exc
    return b"".join(output)


def compress(data: bytes, level: int) -> bytes:
    """A file for storage: ISA-L's ``level`` (0-3)."""
    return isal_zlib.compress(data, level, wbits=GZIP_WBITS)


def compressor(level: int) -> "zlib_ng._Compress":
    """A gzip stream written a piece at a time (an archive), as ``compress`` writes it whole."""
    return zlib_ng.compressobj(level, zlib_ng.DEFLATED, GZIP_WBITS)


def decompress_stored(data: bytes) -> bytes:
    """A file this service compressed with ``compress``: no cap, it was checked on its way in."""
    return zlib_ng.decompress(data, wbits=GZIP_WBITS)
