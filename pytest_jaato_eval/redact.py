"""Credentials never leave the run in a record.

A script grader inherits the plugin's environment, and a grader that prints it
(`env`, `set -x`, a provider's "invalid key sk-…" error) would otherwise copy an
API key into the store, the JUnit file, the failure text and the HTML report.
Every arm record passes through one `Redactor` before anything sees it (arm.py),
which replaces each secret value with `***(<VARIABLE NAME>)`: the reader learns
which credential was there, never what it is.

The rule, by name (any case): a variable is a credential when its name ends in
TOKEN, SECRET, PASSWORD, PASSWD, API_KEY, APIKEY, ACCESS_KEY, SECRET_KEY or
PRIVATE_KEY (OPENAI_API_KEY, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, PGPASSWORD…).
A bare `_KEY` is not enough: SORT_KEY or a PUBLIC_KEY is no secret. Values
shorter than MIN_SECRET_CHARS are ignored: masking `true` or `1234` everywhere
would garble every record and protect nothing a real credential needs.

A value is also masked in the shapes it leaks in when it is not printed whole:
each line of a multi-line value (a PEM key printed, then cut into evidence lines),
its base64 and hex encodings. And two shapes are masked whatever the environment
holds: a PEM private-key block, and the token after `Bearer ` (a judge's or a
provider's authorization header echoed in an error).
"""
from __future__ import annotations

import base64
import os
import re
from typing import Any, Mapping

SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "ACCESS_KEY",
                   "SECRET_KEY", "PRIVATE_KEY", "PASSPHRASE", "CREDENTIALS", "CREDENTIAL",
                   "BEARER", "_AUTH", "COOKIE")
MIN_SECRET_CHARS = 6
# A line of a multi-line value, or an encoding's stable core, is masked from this length:
# shorter fragments ("-----", "MII") are everywhere and name nothing.
MIN_FRAGMENT_CHARS = 12
PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----.*?(?:-----END \1-----|\Z)", re.S)
BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/=-]{8,})")


def is_secret_name(name: str) -> bool:
    return name.upper().endswith(SECRET_SUFFIXES)


def mask(name: str) -> str:
    return f"***({name})"


class Redactor:
    """Masks the values of credential variables in strings and JSON-able structures."""

    def __init__(self, secrets: Mapping[str, str]):
        """`secrets`: variable name -> value, already filtered (see `from_environ`)."""
        by_value: dict[str, str] = {}
        for name in sorted(secrets):  # one value under two names: the first name, stably
            # Stripped: `echo $KEY` (unquoted) prints the value without its outer spaces.
            by_value.setdefault(secrets[name].strip(), name)
        self.names = sorted(set(by_value.values()))
        for value, name in list(by_value.items()):
            for fragment in _leak_shapes(value):
                by_value.setdefault(fragment, name)
        self._by_value = by_value
        # Longest first, so a secret that contains another is masked whole.
        self._pattern = re.compile("|".join(
            re.escape(v) for v in sorted(by_value, key=len, reverse=True))) if by_value else None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "Redactor":
        environ = os.environ if environ is None else environ
        return cls({name: value for name, value in environ.items()
                    if is_secret_name(name) and len(value.strip()) >= MIN_SECRET_CHARS})

    def text(self, text: str) -> str:
        if not text:
            return text
        if self._pattern is not None:
            text = self._pattern.sub(lambda m: mask(self._by_value[m.group()]), text)
        if "PRIVATE KEY-----" in text:
            text = PEM_BLOCK.sub(lambda m: mask(m.group(1)), text)
        return BEARER.sub(lambda m: m.group(1) + mask("bearer token"), text)

    def __call__(self, value: Any) -> Any:
        """A copy of `value` with every string in it (keys too) masked; other values as they are."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self(v) for v in value)
        return value


def _encoded_cores(raw: bytes) -> list[str]:
    """The base64 text `raw` shows at each of the three byte alignments it may sit at,
    cut to the characters that depend on `raw` alone."""
    cores = []
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode()
        start = 4 if pad else 0                  # the group shared with what came before
        whole = (pad + len(raw)) // 3 * 4        # the last group shared with what follows
        cores.append(encoded[start:whole])
    return cores


def _leak_shapes(value: str) -> list[str]:
    """How a credential shows when it is not printed whole (see the module text)."""
    shapes = [line.strip() for line in value.splitlines() if line.strip() != value]
    raw = value.encode()
    shapes += _encoded_cores(raw) + [raw.hex()]
    return [s for s in shapes if len(s) >= MIN_FRAGMENT_CHARS and s != value]
