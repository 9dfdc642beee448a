"""A user's text on its way into a header, a screen or a shared artifact.

Two facts, each in one place: which characters a prompt category may not hold (it is sent as
the `X-Specmon-Category` header and painted on the terminal, where CR, LF, NUL or ESC break
the request or the screen), and which parts of a server command line are secrets (an
`--api-key` value, an `Authorization: Bearer ...` string) that sweep.json, stdout and the
server logs show masked while the server itself still gets them.
"""

from __future__ import annotations

import re
import unicodedata

MASK = "***"

# Unicode's "Cc" category: C0 (U+0000-U+001F, TAB, CR, LF, NUL, ESC), DEL and C1 (U+0080-U+009F)
_NAMES = {0: "NUL", 9: "TAB", 10: "LF", 13: "CR", 27: "ESC", 127: "DEL"}


def control_character(text: str) -> str | None:
    """The first control character of `text`, named ('U+000D (CR)'), or None."""
    for ch in text:
        if unicodedata.category(ch) == "Cc":
            code = ord(ch)
            name = _NAMES.get(code)
            return f"U+{code:04X}" + (f" ({name})" if name else "")
    return None


# An option whose name ends in a secret's word, spelled with dashes or underscores, its value
# after a space or '=': --api-key K, --api_key=K, --hf-token K, --password K, --client-secret K
# (--num-speculative-tokens 3 ends in 'tokens': a count, kept). An option starts a word: the
# '-token time' inside "per-token time" is prose, not an option (it masked every "time")
_SECRET_OPTION = re.compile(
    r"""(?ix)
    (?P<opt>(?<![\w-])--?(?:[\w-]*[-_])?(?:api[-_]?key|token|password|passwd|secret|auth|authorization))
    (?P<sep>=|\s+)
    (?P<value>"[^"]*"|'[^']*'|[^\s'"]+)
    """
)
# An Authorization-like header value inside the text: 'Authorization: Bearer X', 'Bearer X',
# 'Basic X', and an environment assignment whose name ends so: OPENAI_API_KEY=X, HF_TOKEN=X.
_BEARER = re.compile(r"(?i)\b(?P<scheme>bearer|basic)(?P<sep>\s+)(?P<value>[^\s'\"]+)")
_ENV_SECRET = re.compile(
    r"(?i)\b(?P<name>[A-Z0-9_]*(?:API_KEY|TOKEN|PASSWORD|SECRET))=(?P<value>[^\s'\"]+)"
)


# a Python or JSON mapping entry a server prints of its own arguments: 'api_key': 'K'
_SECRET_ENTRY = re.compile(
    r"""(?ix)(?P<key>['"]?[\w-]*(?:api[-_]?key|token|password|secret)['"]?\s*[:=]\s*\[?\s*)
    (?P<value>"[^"]*"|'[^']*')"""
)


def secret_values(text: str) -> list[str]:
    """The secret values `text` carries (what mask_secrets hides), longest first: a server's
    own output is masked by these literal values, whatever format it prints them in."""
    found = [m["value"] for m in _SECRET_OPTION.finditer(text)]
    found += [m["value"] for m in _BEARER.finditer(text)]
    found += [m["value"] for m in _ENV_SECRET.finditer(text)]
    values = {v.strip("'\"") for v in found}
    return sorted((v for v in values if len(v) >= 4 and v != MASK), key=len, reverse=True)


def mask_values(text: str, secrets: list[str]) -> str:
    """`text` with each of `secrets` (secret_values) replaced by ***."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def mask_secrets(text: str) -> str:
    """`text` with the value of every secret-carrying option, Authorization-like string and
    secret environment assignment replaced by ***, and so is each other appearance of those
    values (KEY=sk-1 ... --api-key $KEY); everything else kept as written."""
    values = secret_values(text)
    text = _SECRET_OPTION.sub(lambda m: f"{m['opt']}{m['sep']}{_masked(m['value'])}", text)
    text = _BEARER.sub(lambda m: f"{m['scheme']}{m['sep']}{MASK}", text)
    text = _SECRET_ENTRY.sub(lambda m: f"{m['key']}{_masked(m['value'])}", text)
    return mask_values(_ENV_SECRET.sub(lambda m: f"{m['name']}={MASK}", text), values)


def _masked(value: str) -> str:
    """A value masked, its quotes kept (a quoted value may hold spaces)."""
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{quote}{MASK}{quote}"
