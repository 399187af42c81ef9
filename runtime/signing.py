"""Ed25519 signatures for kernel bundles (issue 17): a bundle that carries prebuilt binaries
loads only when signed by a key the user trusts. The signature covers the bytes it is given
(a bundle's manifest, which records a sha256 for every file, so it covers every file).

Formats (all text):

- private key: PKCS#8 PEM, unencrypted (`-----BEGIN PRIVATE KEY-----`). `fuel keygen` writes
  it with mode 0600: whoever reads it can sign bundles this machine will run.
- public key: one line `fuel-ed25519 <base64 of the raw 32-byte key> [comment]`, in the style
  of OpenSSH's authorized_keys. A trust file holds one or more such lines; blank lines and
  lines starting with `#` are skipped.
- key id: the first 16 bytes of sha256(raw 32-byte public key), as 32 lowercase hex digits.
- signature record (JSON-able): `{"algorithm": "ed25519", "key_id": "<32 hex>",
  "signature": "<base64 of the 64-byte signature>"}`.

Every failure is a `SigningError` whose message starts with the file it concerns (for keys);
no exception of `cryptography` escapes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from runtime.fsutil import read_regular_file

PrivateKey = Ed25519PrivateKey
PublicKey = Ed25519PublicKey

ALGORITHM = "ed25519"
PUBLIC_KEY_TAG = "fuel-ed25519"
RECORD_FIELDS = ("algorithm", "key_id", "signature")
_KEY_ID = re.compile(r"[0-9a-f]{32}")


class SigningError(Exception):
    """A key file that cannot be used, or a signature record that does not verify."""


def key_id(public_key: PublicKey) -> str:
    """The key id: the first 16 bytes of sha256 of the raw public key, in hex."""
    return hashlib.sha256(_raw(public_key)).digest()[:16].hex()


def public_key_line(public_key: PublicKey, comment: str = "") -> str:
    """`fuel-ed25519 <base64 key> [comment]`, without a newline (a comment is one line)."""
    if "\n" in comment or "\r" in comment:
        raise SigningError("a public key comment is one line")
    key = base64.b64encode(_raw(public_key)).decode()
    return f"{PUBLIC_KEY_TAG} {key} {comment}".rstrip()


def generate_key(comment: str = "") -> tuple[bytes, str]:
    """A new key pair: (the private key as unencrypted PKCS#8 PEM, its public key line + "\\n")."""
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return pem, public_key_line(private.public_key(), comment) + "\n"


def load_private_key(path: str | os.PathLike[str]) -> PrivateKey:
    """The Ed25519 private key in the PKCS#8 PEM file at `path`."""
    text = _read_text(path)
    if text.lstrip().startswith(PUBLIC_KEY_TAG):
        raise SigningError(f"{path}: a public key; signing needs the private key (the .key file)")
    try:
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except TypeError:  # cryptography's word for "encrypted, and no password given"
        raise SigningError(f"{path}: an encrypted private key; fuel keys are unencrypted") from None
    except (ValueError, UnsupportedAlgorithm):
        raise SigningError(f"{path}: not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path}: a private key of type {_kind(key)}, not Ed25519")
    return key


def load_public_keys(paths: Iterable[str | os.PathLike[str]]) -> list[PublicKey]:
    """Every `fuel-ed25519` key in the trust files at `paths`, in order; each file must hold
    at least one."""
    keys: list[PublicKey] = []
    for path in paths:
        found = [
            _parse_public_line(path, n, line)
            for n, line in enumerate(_read_text(path).splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
        if not found:
            raise SigningError(f"{path}: no {PUBLIC_KEY_TAG} key in it")
        keys += found
    return keys


def sign(data: bytes, private_key: PrivateKey) -> dict[str, str]:
    """The signature record of `data` by `private_key`."""
    return {
        "algorithm": ALGORITHM,
        "key_id": key_id(private_key.public_key()),
        "signature": base64.b64encode(private_key.sign(data)).decode(),
    }


def verify(data: bytes, record: Mapping[str, object], trusted: Sequence[PublicKey]) -> str:
    """Check that `record` is a signature of `data` by one of the `trusted` keys; its key id."""
    signature, kid = _parse_record(record)
    key = next((k for k in trusted if key_id(k) == kid), None)
    if key is None:
        if not trusted:
            raise SigningError(f"signed by key {kid}, but no key is trusted")
        raise SigningError(f"signed by key {kid}, which is not among the {len(trusted)} trusted")
    try:
        key.verify(signature, data)
    except InvalidSignature:
        raise SigningError(
            f"bad signature by key {kid}: the signed data or the signature was changed"
        ) from None
    return kid


def _parse_record(record: object) -> tuple[bytes, str]:
    """(signature bytes, key id) of a well-formed record; a SigningError otherwise."""
    if not isinstance(record, Mapping):
        raise SigningError(f"malformed signature record: a {type(record).__name__}, not a mapping")
    if set(record) != set(RECORD_FIELDS):
        raise SigningError(
            f"malformed signature record: fields {sorted(map(str, record))}, "
            f"expected {list(RECORD_FIELDS)}"
        )
    bad = [f for f in RECORD_FIELDS if not isinstance(record[f], str)]
    if bad:
        raise SigningError(f"malformed signature record: {', '.join(bad)} not a string")
    if record["algorithm"] != ALGORITHM:
        raise SigningError(f"unknown signature algorithm {record['algorithm']!r} (fuel: ed25519)")
    kid = str(record["key_id"])
    if not _KEY_ID.fullmatch(kid):
        raise SigningError(f"malformed signature record: key_id {kid!r} is not 32 hex digits")
    signature = _b64(str(record["signature"]))
    if signature is None or len(signature) != 64:
        raise SigningError("malformed signature record: signature is not 64 bytes of base64")
    return signature, kid


def _parse_public_line(path: str | os.PathLike[str], n: int, line: str) -> PublicKey:
    """The key on line `n` of trust file `path`."""
    where = f"{path}: line {n}"
    words = line.split(maxsplit=2)
    if words[0] != PUBLIC_KEY_TAG:
        if "PRIVATE KEY" in line:
            raise SigningError(f"{where}: a private key; trust the public key (the .pub file)")
        raise SigningError(f"{where}: expected '{PUBLIC_KEY_TAG} <base64 key> [comment]'")
    raw = _b64(words[1]) if len(words) > 1 else None
    if raw is None or len(raw) != 32:
        raise SigningError(f"{where}: the key is not 32 bytes of base64")
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise SigningError(f"{where}: not a valid Ed25519 public key") from None


def _read_text(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of the regular file at `path`; a SigningError if unreadable or empty."""
    try:
        data = read_regular_file(path)
    except OSError as e:
        raise SigningError(f"{path}: cannot read: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SigningError(f"{path}: not UTF-8 text, so not a fuel key file") from None
    if not text.strip():
        raise SigningError(f"{path}: empty")
    return text


def _b64(text: str) -> bytes | None:
    """Strict base64 decode; None for anything else."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _raw(public_key: PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _kind(key: object) -> str:
    """'RSA', 'EC', ... from a cryptography key class name (`RSAPrivateKey` -> 'RSA')."""
    name = type(key).__name__.removeprefix("_")
    return name.removesuffix("PrivateKey") or name
