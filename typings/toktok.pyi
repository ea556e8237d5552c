# toktok-rs ships no types; these are the signatures its docstrings give (toktok 0.3).
from collections.abc import Iterable

def batch_count(
    texts: Iterable[str],
    encoding: str = "cl100k_base",
    threads: int = 0,
    with_special: bool = False,
) -> list[int]: ...
def truncate(text: str, max_tokens: int, encoding: str = "cl100k_base") -> tuple[str, int]: ...
