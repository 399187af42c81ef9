"""`fuel keygen`: make an Ed25519 key pair for signing kernel bundles.

    fuel keygen OUT [--comment TEXT] [--force]

Writes `OUT.key` (the private key, PKCS#8 PEM, unencrypted, mode 0600: keep it secret) and
`OUT.pub` (one `fuel-ed25519 <base64> [comment]` line: give it to whoever should trust your
bundles), then prints the key id. Both files are staged and synced before either is renamed
into place (`atomic_write_files`); an existing file is kept unless `--force`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runtime.fsutil import atomic_write_files
from runtime.signing import SigningError, generate_key, key_id, load_public_keys

PRIVATE_MODE = 0o600


def add_keygen_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `keygen` subcommand to an `add_subparsers()` object; it dispatches to cmd_keygen."""
    p = subparsers.add_parser("keygen", help="make a key pair for signing kernel bundles")
    p.add_argument("out", metavar="OUT", help="writes OUT.key (private, 0600) and OUT.pub")
    p.add_argument("--comment", help="the public key's comment (default: OUT's file name)")
    p.add_argument("--force", action="store_true", help="overwrite OUT.key and OUT.pub")
    p.set_defaults(fn=cmd_keygen)
    return p


def key_paths(out: str) -> tuple[Path, Path]:
    """(OUT.key, OUT.pub): the suffixes are appended, never substituted."""
    return Path(f"{out}.key"), Path(f"{out}.pub")


def cmd_keygen(args: argparse.Namespace) -> int:
    """Write OUT.key and OUT.pub, print the key id."""
    private_path, public_path = key_paths(args.out)
    if not args.force:
        for path in (private_path, public_path):
            if path.exists() or path.is_symlink():
                raise SigningError(f"{path}: already exists (--force overwrites it)")
    comment = Path(args.out).name if args.comment is None else args.comment
    pem, public_line = generate_key(comment)
    atomic_write_files([(private_path, pem), (public_path, public_line.encode())], [PRIVATE_MODE])
    kid = key_id(load_public_keys([public_path])[0])  # read back: the id of what is on disk
    print(f"wrote {private_path} (private, keep it secret) and {public_path}")
    print(f"key id {kid}")
    return 0
