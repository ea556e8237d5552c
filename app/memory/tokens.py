"""Token counts, with a real BPE tokenizer that works offline (cl100k_base).

``toktok`` (the ``toktok-rs`` package) has the cl100k_base vocabulary compiled into its
extension module: nothing is downloaded or looked up at run time. Its counts equal tiktoken's.
Everything else in the service goes through ``count`` and ``truncate`` only, so that the
tokenizer can be swapped here alone.
"""

import hashlib
import threading
from collections import OrderedDict

import toktok

ENCODING = "cl100k_base"
# Counting 2 MB costs 0.1-0.25 s; the same summary and items are counted on every context
# pack, so counts are remembered by the text's digest (not the text: large texts stay unpinned).
CACHE_SIZE = 4096

_cache: OrderedDict[bytes, int] = OrderedDict()
_cache_lock = threading.Lock()


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _encodable(text: str) -> str:
    """JSON may carry lone surrogates, which UTF-8 cannot hold: each becomes one '?', so
    that positions in the result are positions in ``text``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def count(text: str) -> int:
    """How many cl100k_base tokens ``text`` is (special-token strings count as plain text)."""
    key = _digest(text)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    tokens = toktok.batch_count([_encodable(text)], ENCODING, threads=1)[0]
    with _cache_lock:
        _cache[key] = tokens
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return tokens


def truncate(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` of at most ``max_tokens`` tokens, cut on a character."""
    if max_tokens <= 0:
        return ""
    kept = toktok.truncate(_encodable(text), max_tokens, ENCODING)[0]
    return text[: len(kept)]
