"""Secrets out of a save before it is stored (seed 000, "Security").

Each secret is replaced by ``[REDACTED:<kind>]`` where it stands; only the counts per kind
leave this module. The patterns run in order, most specific first, so that a JWT inside a
bearer header counts once, as a JWT.
"""

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

MARKER = "[REDACTED:{kind}]"

# Where a token starts and ends: not next to an ASCII letter or digit. Not ``\b``, which is
# Unicode-aware: a key glued to "é" or "密钥" (text without spaces) would escape it. Patterns
# scope IGNORECASE to their words, which would otherwise let "ı" or "K" (Kelvin) count as ASCII.
_START = r"(?<![A-Za-z0-9])"
_END = r"(?![A-Za-z0-9])"

_SECRET_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("jwt", re.compile(_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    (
        "api_key",
        re.compile(
            _START + r"(?:"
            r"sk-ant-[A-Za-z0-9_-]{20,}"  # Anthropic
            r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"  # OpenAI
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
            r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
            r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
            r"|AIza[0-9A-Za-z_-]{35}"  # Google
            r"|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,}"  # Stripe
            r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
            r"|gsk_[A-Za-z0-9]{30,}"  # Groq
            r"|xai-[A-Za-z0-9]{30,}"  # xAI
            r")"
        ),
    ),
    (
        "cloud_access_key",
        re.compile(
            _START
            + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}"
            + _END  # AWS key ids
            + r"|(?i:aws_secret_access_key|aws_session_token)\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{16,}"
            r"|(?i:AccountKey|SharedAccessKey)=[A-Za-z0-9+/=]{20,}"  # Azure
        ),
    ),
    ("bearer_token", re.compile(_START + r"(?i:bearer)\s+[A-Za-z0-9._~+/-]{12,}=*")),
    (
        "password",
        re.compile(
            _START
            + r"(?i:password|passwd|pwd|pass|secret|client_secret|api[_-]?key|access[_-]?token"
            r"|auth[_-]?token)\b(\s*[:=]\s*)"
            r"(?!\[REDACTED:)(\"[^\"\n]+\"|'[^'\n]+'|[^\s,;\"'}\]]+)"
        ),
    ),
]


# The literal text every match of a kind's pattern holds, case-folded. A pattern runs only on
# text that holds one of its literals: a few substring searches cost far less than the
# patterns (which, with their case-insensitive alternations, try every position), and never
# change the result, since no match can lack them. Case-folding covers what IGNORECASE
# matches (the long s and the Kelvin sign), dotless and dotted capital i apart (see _fold).
_LITERALS: dict[str, tuple[str, ...]] = {
    "private_key": ("-----begin",),
    "jwt": ("eyj",),
    "api_key": ("sk-", "sk_", "rk_", "gh", "github_pat_", "glpat-", "xox", "aiza", "hf_", "xai-"),
    "cloud_access_key": (
        *("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
        *("aws_s", "accountkey", "accesskey"),
    ),
    "bearer_token": ("bearer",),
    "password": ("pass", "pwd", "secret", "api", "token"),
}


def _fold(text: str) -> str:
    # IGNORECASE also matches "i" to U+0131, which casefold() leaves as it is.
    return text.casefold().replace("\u0131", "i")


def _replacement(kind: str) -> Callable[[re.Match[str]], str]:
    marker = MARKER.format(kind=kind)
    if kind == "password":
        # Keep the name and the "=": only the value is the secret.
        return lambda match: match.group(0)[: match.start(2) - match.start(0)] + marker
    return lambda _match: marker


_REPLACEMENTS = [(kind, pattern, _replacement(kind)) for kind, pattern in _SECRET_PATTERNS]


def redact_text(text: str, counts: Counter[str]) -> str:
    folded = _fold(text)
    for kind, pattern, replacement in _REPLACEMENTS:
        # map() with the bound method: no Python frame per literal (a generator's cost more
        # than the searches themselves on a large save).
        if not any(map(folded.__contains__, _LITERALS[kind])):
            continue
        text, found = pattern.subn(replacement, text)
        if found:
            counts[kind] += found
            folded = _fold(text)
    return text


def redact_strings(value: Any, counts: Counter[str]) -> Any:
    """Every string inside ``value`` (keys excepted), redacted in place where mutable."""
    if isinstance(value, str):
        return redact_text(value, counts)
    if isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = redact_strings(item, counts)
    elif isinstance(value, dict):
        for key, item in value.items():
            value[key] = redact_strings(item, counts)
    return value


def redact_save(document: dict[str, Any]) -> dict[str, int]:
    """Redact the parts of a save that carry free text; returns the counts by kind."""
    counts: Counter[str] = Counter()
    context = document["context"]
    for message in context["conversation_history"]:
        if isinstance(message, dict) and "content" in message:
            message["content"] = redact_strings(message["content"], counts)
    artifacts = context["artifacts"]
    for name, artifact in artifacts.items():
        if isinstance(artifact, dict):
            if "content" in artifact:
                artifact["content"] = redact_strings(artifact["content"], counts)
        else:
            artifacts[name] = redact_strings(artifact, counts)
    redact_strings(context["decisions"], counts)
    redact_strings(document["debates"], counts)
    redact_strings(document["errors"], counts)
    return dict(sorted(counts.items()))
