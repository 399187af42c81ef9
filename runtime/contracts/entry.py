"""Entry points: `package.module:attribute`, resolved only inside allowed packages.

A contract never imports arbitrary code. Its entry point must live in one of fuel's own
packages (`FUEL_PACKAGES`) or in a package the caller allowed explicitly (`allow=("mypkg",)`,
or `--allow mypkg` on the command line); anything else is `EntryPointNotAllowed`, raised before
any import is attempted.

An entry point names either the kernel itself or, when the contract gives `entry_args`, a
*factory*: `factory(dtypes, **entry_args)` is called once per dtype key of the fan-out and
returns the kernel, or a `BuiltKernel` that also carries the executor's positional fast path
and the helper functions the kernel depends on (mixed into its revision hash).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from runtime.binding_table import Kernel
from runtime.contracts.errors import BadEntryPoint, EntryPointNotAllowed, EntryPointUnresolved

FUEL_PACKAGES = ("fuel_dialect", "passes", "lowering", "runtime", "frontends")
"""fuel's own top-level packages: entry points there need no permission."""

_ENTRY = re.compile(
    r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attr>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)$"
)


@dataclass(frozen=True)
class BuiltKernel:
    """What a factory may return instead of a bare kernel."""

    kernel: Kernel
    direct: Callable[..., Any] | None = None
    """The executor's positional fast path (see `BindingEntry.direct`), if exactly equivalent."""
    depends_on: tuple[Callable[..., Any], ...] = ()
    """Helpers the kernel calls; their source is part of the kernel's revision."""


def _allowed(module: str, allow: Collection[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in (*FUEL_PACKAGES, *allow))


def check_entry_point(entry: str, allow: Collection[str] = ()) -> tuple[str, str]:
    """Split `entry` into (module, attribute) if it is well-formed and allowed; no import."""
    m = _ENTRY.match(entry.strip())
    if not m:
        raise BadEntryPoint("", 0, f"entry point '{entry}' is not 'package.module:attribute'")
    module, attr = m.group("module"), m.group("attr")
    if not _allowed(module, allow):
        extra = f", allowed: {', '.join(allow)}" if allow else ""
        raise EntryPointNotAllowed(
            "",
            0,
            f"entry point '{entry}' is outside fuel's packages "
            f"({', '.join(FUEL_PACKAGES)}{extra}); allow its package explicitly to import it",
        )
    return module, attr


def resolve_entry_point(entry: str, allow: Collection[str] = ()) -> Callable[..., Any]:
    """Import the entry point's module and return the callable it names.

    Raises `EntryPointNotAllowed` (nothing imported), or `EntryPointUnresolved` when the
    module does not import or the attribute is missing or not callable. Errors carry no
    file position; the importer adds the contract's.
    """
    module, attr = check_entry_point(entry, allow)
    try:
        obj: Any = importlib.import_module(module)
    except Exception as e:  # any failure inside foreign module code is the contract's problem
        raise EntryPointUnresolved("", 0, f"cannot import '{module}': {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise EntryPointUnresolved("", 0, f"'{module}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise EntryPointUnresolved("", 0, f"'{entry}' is not callable")
    return obj
