"""Entry points: `package.module:function`, resolved only to functions declared for contracts.

A contract is data: it never chooses which code runs. Its entry point names a function that
its own module *declares* resolvable, with one of two decorators:

* `@kernel_factory`: `factory(dtypes, **entry_args)` is called once per dtype key of the
  fan-out with the contract's `entry_args` (data: numbers, strings, booleans, null, lists and
  mappings of those) and returns the kernel, or a `BuiltKernel` that also carries the
  executor's positional fast path and the helper functions the kernel depends on (mixed into
  its revision hash);
* `@kernel_entry`: the function is the kernel itself, `kernel(inputs, outputs, params)`; its
  contract gives no `entry_args`.

Resolution checks, in order: the grammar (the function is one identifier, never a dotted path
walking out of the module: `BadEntryPoint`); the package (fuel's own, `FUEL_PACKAGES`, or one
the caller allowed explicitly: `EntryPointNotAllowed`, raised before any import); the import
and the name (`EntryPointUnresolved`); and the declaration: the object the module holds under
that name must be the very function a decorator registered under that module and name
(`EntryPointNotDeclared`). A name imported into an allowed module (`subprocess.run`, a builtin
such as `os.system`, a factory of another module) and any undeclared function are refused.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from runtime.binding_table import Kernel
from runtime.contracts.errors import (
    BadEntryPoint,
    EntryPointNotAllowed,
    EntryPointNotDeclared,
    EntryPointUnresolved,
)

FUEL_PACKAGES = ("fuel_dialect", "passes", "lowering", "runtime", "frontends")
"""fuel's own top-level packages: entry points there need no permission."""

_ENTRY = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attr>[^:]*)$")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")

EntryKind = Literal["factory", "kernel"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class BuiltKernel:
    """What a factory may return instead of a bare kernel."""

    kernel: Kernel
    direct: Callable[..., Any] | None = None
    """The executor's positional fast path (see `BindingEntry.direct`), if exactly equivalent."""
    depends_on: tuple[Callable[..., Any], ...] = ()
    """Helpers the kernel calls; their source is part of the kernel's revision."""


@dataclass(frozen=True)
class Declared:
    """A function declared for contracts, and how a contract calls it."""

    fn: Callable[..., Any]
    kind: EntryKind
    """`factory`: called as `fn(dtypes, **entry_args)`; `kernel`: `fn` is the kernel."""


_DECLARED: dict[tuple[str, str], Declared] = {}
"""Every declared function by (`__module__`, `__qualname__`): the only names contracts resolve.
Keyed by where the function was defined, and checked by identity, so a re-export, an alias or
a replacement under the same name is not declared."""


def _declare(fn: F, kind: EntryKind, decorator: str) -> F:
    if not inspect.isfunction(fn):
        raise TypeError(f"@{decorator} declares a Python function, not {fn!r}")
    module, name = fn.__module__, fn.__qualname__
    if not _IDENT.match(name):
        raise TypeError(f"@{decorator} declares a module-level function, not '{module}.{name}'")
    _DECLARED[(module, name)] = Declared(fn, kind)
    return fn


def kernel_factory(fn: F) -> F:
    """Declare `fn(dtypes, **entry_args)` a kernel factory that contracts may name.

    `fn` must be a module-level function; contracts name it `its.module:fn` (where it is
    defined, not where it is re-exported) and pass it their `entry_args` (data only). Returns
    `fn` itself, unchanged: the decorator only records it, and its line is not part of any
    revision hash.
    """
    return _declare(fn, "factory", "kernel_factory")


def kernel_entry(fn: F) -> F:
    """Declare `fn(inputs, outputs, params)` a kernel that contracts may name directly (with no
    `entry_args`). Returns `fn` itself, unchanged, like `kernel_factory`."""
    return _declare(fn, "kernel", "kernel_entry")


def declared_kind(fn: object) -> EntryKind | None:
    """How contracts call `fn` if it is declared (`factory` / `kernel`), else None."""
    key = (str(getattr(fn, "__module__", "")), str(getattr(fn, "__qualname__", "")))
    hit = _DECLARED.get(key)
    return hit.kind if hit is not None and hit.fn is fn else None


def _allowed(module: str, allow: Collection[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in (*FUEL_PACKAGES, *allow))


def check_entry_point(entry: str, allow: Collection[str] = ()) -> tuple[str, str]:
    """Split `entry` into (module, function) if it is well-formed and allowed; no import."""
    m = _ENTRY.match(entry.strip())
    if not m:
        raise BadEntryPoint("", 0, f"entry point '{entry}' is not 'package.module:function'")
    module, attr = m.group("module"), m.group("attr")
    if not _IDENT.match(attr):
        raise BadEntryPoint(
            "",
            0,
            f"entry point '{entry}': the function after ':' is one identifier "
            "(never a dotted path or an expression)",
        )
    if not _allowed(module, allow):
        extra = f", allowed: {', '.join(allow)}" if allow else ""
        raise EntryPointNotAllowed(
            "",
            0,
            f"entry point '{entry}' is outside fuel's packages "
            f"({', '.join(FUEL_PACKAGES)}{extra}); allow its package explicitly to import it",
        )
    return module, attr


def resolve_entry_point(entry: str, allow: Collection[str] = ()) -> Declared:
    """Import the entry point's module and return the declared function it names.

    Raises `BadEntryPoint` or `EntryPointNotAllowed` (nothing imported), `EntryPointUnresolved`
    when the module does not import or lacks the name, and `EntryPointNotDeclared` when the
    name is not a function that module declares with `@kernel_factory` / `@kernel_entry`.
    Errors carry no file position; the importer adds the contract's.
    """
    module, attr = check_entry_point(entry, allow)
    try:
        mod = importlib.import_module(module)
    except Exception as e:  # any failure inside foreign module code is the contract's problem
        raise EntryPointUnresolved("", 0, f"cannot import '{module}': {e}") from None
    # The module's own namespace only: no module-level __getattr__, no descriptors.
    obj = vars(mod).get(attr)
    if obj is None:
        raise EntryPointUnresolved("", 0, f"'{module}' has no function '{attr}'")
    declared = _DECLARED.get((module, attr))
    if declared is not None and declared.fn is obj:
        return declared
    raise EntryPointNotDeclared("", 0, _undeclared(entry, module, attr, obj))


def _undeclared(entry: str, module: str, attr: str, obj: object) -> str:
    """Why `obj`, found under `entry`, is refused."""
    how = "declare it with @kernel_factory or @kernel_entry (runtime.contracts)"
    if not inspect.isfunction(obj):
        return f"'{entry}' is {type(obj).__name__} {obj!r:.60}, not a declared kernel function"
    if obj.__qualname__ != attr and obj.__module__ == module:
        return f"'{entry}' is an alias of '{module}:{obj.__qualname__}': name the function itself"
    if obj.__module__ != module:
        return (
            f"'{entry}' is defined in '{obj.__module__}', not in '{module}': an imported name "
            f"is not an entry point"
        )
    return f"'{entry}' is not declared a kernel factory or kernel entry: {how}"
