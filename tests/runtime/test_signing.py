"""runtime/signing.py and `fuel keygen`: sign/verify round trips, every way a signature or a
key file can be wrong (one readable SigningError each), and the key files keygen writes."""

from __future__ import annotations

import base64
import os
import re
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from runtime.signing import (
    SigningError,
    generate_key,
    key_id,
    load_private_key,
    load_public_keys,
    sign,
    verify,
)
from tools.fuel import main as fuel_main

DATA = b'{"format": 1, "files": {"kernels.c": "sha256:..."}}'


def _pair(tmp_path: Path, name: str = "k") -> tuple[Path, Path]:
    pem, pub = generate_key(name)
    (tmp_path / f"{name}.key").write_bytes(pem)
    (tmp_path / f"{name}.pub").write_text(pub)
    return tmp_path / f"{name}.key", tmp_path / f"{name}.pub"


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return _pair(tmp_path)


def test_round_trip(keys: tuple[Path, Path]) -> None:
    private = load_private_key(keys[0])
    trusted = load_public_keys([keys[1]])
    record = sign(DATA, private)
    assert record["algorithm"] == "ed25519"
    assert record["key_id"] == key_id(private.public_key()) == key_id(trusted[0])
    assert len(record["key_id"]) == 32 and len(base64.b64decode(record["signature"])) == 64
    assert verify(DATA, record, trusted) == record["key_id"]


def test_public_key_format(keys: tuple[Path, Path]) -> None:
    line = keys[1].read_text()
    assert line.endswith(" k\n") and line.count("\n") == 1
    tag, b64, comment = line.split()
    assert tag == "fuel-ed25519" and len(base64.b64decode(b64)) == 32 and comment == "k"
    assert keys[0].read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


def test_trust_file_with_several_keys(tmp_path: Path) -> None:
    (k1, p1), (k2, p2) = _pair(tmp_path, "a"), _pair(tmp_path, "b")
    trust = tmp_path / "trusted"
    trust.write_text(f"# release keys\n\n{p1.read_text()}{p2.read_text()}")
    trusted = load_public_keys([trust])
    assert len(trusted) == 2
    for k in (k1, k2):
        record = sign(DATA, load_private_key(k))
        assert verify(DATA, record, trusted) == record["key_id"]


def test_tampered_data(keys: tuple[Path, Path]) -> None:
    record = sign(DATA, load_private_key(keys[0]))
    with pytest.raises(SigningError, match="bad signature by key"):
        verify(DATA + b" ", record, load_public_keys([keys[1]]))


def test_tampered_signature(keys: tuple[Path, Path]) -> None:
    record = sign(DATA, load_private_key(keys[0]))
    sig = bytearray(base64.b64decode(record["signature"]))
    sig[7] ^= 1
    record["signature"] = base64.b64encode(bytes(sig)).decode()
    with pytest.raises(SigningError, match="bad signature by key"):
        verify(DATA, record, load_public_keys([keys[1]]))


def test_untrusted_key_is_named(tmp_path: Path) -> None:
    (k1, _), (_, p2) = _pair(tmp_path, "a"), _pair(tmp_path, "b")
    record = sign(DATA, load_private_key(k1))
    with pytest.raises(SigningError, match=f"signed by key {record['key_id']}, which is not"):
        verify(DATA, record, load_public_keys([p2]))
    with pytest.raises(SigningError, match="but no key is trusted"):
        verify(DATA, record, [])


def test_forged_key_id_does_not_verify(tmp_path: Path) -> None:
    """A record claiming a trusted key's id but signed by another key is a bad signature."""
    (k1, _), (_, p2) = _pair(tmp_path, "a"), _pair(tmp_path, "b")
    trusted = load_public_keys([p2])
    record = {**sign(DATA, load_private_key(k1)), "key_id": key_id(trusted[0])}
    with pytest.raises(SigningError, match="bad signature"):
        verify(DATA, record, trusted)


GOOD = {"algorithm": "ed25519", "key_id": "0" * 32, "signature": "A" * 86 + "=="}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([1, 2], "malformed signature record: a list, not a mapping"),
        ({"algorithm": "ed25519"}, "malformed signature record: fields"),
        ({**GOOD, "extra": "x"}, "malformed signature record: fields"),
        ({**GOOD, "signature": 5}, "signature not a string"),
        ({**GOOD, "algorithm": "rsa-sha256"}, "unknown signature algorithm 'rsa-sha256'"),
        ({**GOOD, "key_id": "XYZ"}, "key_id 'XYZ' is not 32 hex digits"),
        ({**GOOD, "signature": "not base64!"}, "signature is not 64 bytes"),
        ({**GOOD, "signature": "AAAA"}, "signature is not 64 bytes"),
    ],
)
def test_malformed_records(keys: tuple[Path, Path], record: object, message: str) -> None:
    with pytest.raises(SigningError, match=message):
        verify(DATA, record, load_public_keys([keys[1]]))  # type: ignore[arg-type]


def _ec_pem() -> bytes:
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"  \n", "empty"),
        (b"\xff\xfe garbage", "not UTF-8 text"),
        (b"hello world\n", "not a PEM private key"),
        (b"fuel-ed25519 AAAA\n", "a public key; signing needs the private key"),
        (_ec_pem(), "a private key of type EC, not Ed25519"),
    ],
)
def test_bad_private_key_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    with pytest.raises(SigningError, match=f"^{re.escape(str(path))}: {message}"):
        load_private_key(path)


def test_encrypted_private_key(tmp_path: Path) -> None:
    pem = load_private_key(_pair(tmp_path)[0]).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    (tmp_path / "enc.key").write_bytes(pem)
    with pytest.raises(SigningError, match="an encrypted private key"):
        load_private_key(tmp_path / "enc.key")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"# only a comment\n", "no fuel-ed25519 key in it"),
        (b"\xff\xfe garbage", "not UTF-8 text"),
        (b"ssh-ed25519 AAAA me\n", "line 1: expected 'fuel-ed25519 <base64 key> \\[comment\\]'"),
        (b"fuel-ed25519\n", "line 1: the key is not 32 bytes of base64"),
        (b"\nfuel-ed25519 AAAA\n", "line 2: the key is not 32 bytes of base64"),
        (b"fuel-ed25519 !!!notbase64\n", "line 1: the key is not 32 bytes of base64"),
    ],
)
def test_bad_public_key_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.pub"
    path.write_bytes(content)
    with pytest.raises(SigningError, match=f"^{re.escape(str(path))}: {message}"):
        load_public_keys([path])


def test_private_key_given_as_public(keys: tuple[Path, Path]) -> None:
    with pytest.raises(
        SigningError, match=f"^{re.escape(str(keys[0]))}: line 1: a private key; trust the public"
    ):
        load_public_keys([keys[0]])


def test_unreadable_key_files(tmp_path: Path) -> None:
    with pytest.raises(SigningError, match="missing.pub: cannot read: No such file"):
        load_public_keys([tmp_path / "missing.pub"])
    with pytest.raises(SigningError, match="cannot read: Is a directory"):
        load_private_key(tmp_path)
    os.mkfifo(tmp_path / "fifo")  # never waits for a writer
    with pytest.raises(SigningError, match="fifo: cannot read: not a regular file"):
        load_public_keys([tmp_path / "fifo"])


def test_keygen_writes_a_usable_pair(tmp_path: Path, capsys) -> None:
    out = tmp_path / "keys" / "release"
    assert fuel_main(["keygen", str(out)]) == 0
    private, public = Path(f"{out}.key"), Path(f"{out}.pub")
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(public).st_mode) == 0o666 & ~umask  # a normal file
    assert public.read_text().rstrip().endswith(" release")
    kid = key_id(load_public_keys([public])[0])
    assert f"key id {kid}" in capsys.readouterr().out
    assert verify(DATA, sign(DATA, load_private_key(private)), load_public_keys([public])) == kid


def test_keygen_refuses_to_overwrite(tmp_path: Path, capsys) -> None:
    out = tmp_path / "k"
    assert fuel_main(["keygen", str(out), "--comment", "ci signer"]) == 0
    before = Path(f"{out}.key").read_bytes()
    assert fuel_main(["keygen", str(out)]) == 1
    assert f"{out}.key: already exists (--force overwrites it)" in capsys.readouterr().err
    assert Path(f"{out}.key").read_bytes() == before
    Path(f"{out}.key").unlink()  # the .pub alone still blocks a new pair
    assert fuel_main(["keygen", str(out)]) == 1
    assert fuel_main(["keygen", str(out), "--force"]) == 0
    assert stat.S_IMODE(os.stat(f"{out}.key").st_mode) == 0o600
    assert Path(f"{out}.pub").read_text().rstrip().endswith(" k")
