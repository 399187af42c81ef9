"""Entry points resolve only to functions their module declares (issue 17, S4).

A contract is data: it names `package.module:function`, and the function must be one its module
declared with `@kernel_factory` / `@kernel_entry`. The two exploits that found the hole (a
dotted path walking out of a fuel module into `subprocess.run`; a fuel loader that executes
its `source` argument) are refused with their rule and leave no trace; so are imported names,
builtins, aliases, undeclared functions and entry_args that are not data.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.binding_table import KernelBindingTable
from runtime.contracts import FkcError, import_glob, kernel_entry, kernel_factory
from runtime.contracts import errors as E
from runtime.contracts.entry import declared_kind, resolve_entry_point
from runtime.contracts.lower import _source_of

Write = Callable[..., Path]
FACTORY = "runtime.kernels.cpu.contracts.factories:unary"
ARGS = "entry_args: {ufunc: exp, compute: f64}"

DECLARED = """
import numpy as np
from runtime.contracts import kernel_entry, kernel_factory

@kernel_factory
def exp_wide(dtypes, accumulate):
    wide = np.dtype(accumulate)

    def kernel(inputs, outputs, params):
        np.exp(inputs[0], out=outputs[0], dtype=wide, casting="unsafe")

    return kernel

@kernel_entry
def exp_kernel(inputs, outputs, params):
    np.exp(inputs[0], out=outputs[0])

alias = exp_wide
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for this test's packages (`fkc_s4_*`), forgotten afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in [m for m in sys.modules if m.startswith("fkc_s4_")]:
        del sys.modules[name]


def _module(site: Path, dotted: str, source: str) -> None:
    """Write module `dotted` (packages created on the way) under `site`."""
    *pkgs, leaf = dotted.split(".")
    folder = site
    for p in pkgs:
        folder = folder / p
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").touch()
    (folder / f"{leaf}.py").write_text(source)


def _contract(base: str, entry: str, args: str | None = ARGS) -> str:
    text = base.replace(FACTORY, entry)
    return text.replace(ARGS, args) if args is not None else text.replace(f"\n{ARGS}", "")


def _refused(path: Path, allow: tuple[str, ...] = ()) -> FkcError:
    with pytest.raises(FkcError) as info:
        import_glob(path, KernelBindingTable(), allow=allow, ledger=None)
    assert str(info.value).startswith(f"{path}:{info.value.line}: [{info.value.rule}] ")
    return info.value


# -- the two exploits ----------------------------------------------------------------------


def test_a_dotted_path_out_of_a_fuel_module_is_refused(
    base: str, write: Write, tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    args = f'entry_args: {{args: [sh, -c, "touch {marker}"]}}'
    text = _contract(base, "lowering.cpu.codegen:subprocess.run", args)
    err = _refused(write(text))
    assert type(err) is E.BadEntryPoint and "one identifier" in err.message
    assert err.line == text[: text.index("entry_point:")].count("\n") + 1
    assert not marker.exists()


def test_a_fuel_function_that_executes_its_argument_is_refused(
    base: str, write: Write, tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    source = f"open({str(marker)!r}, 'w').write('pwned')"
    text = _contract(
        base, "runtime.loaders.triton:load_kernel", f"entry_args: {{source: {source!r}}}"
    )
    err = _refused(write(text))
    assert type(err) is E.EntryPointNotDeclared and "not declared" in err.message
    assert not marker.exists()


def test_a_package_not_allowed_is_never_imported(
    base: str, write: Write, site: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    _module(site, "fkc_s4_evil", f"open({str(marker)!r}, 'w').write('imported')\n{DECLARED}")
    err = _refused(write(_contract(base, "fkc_s4_evil:exp_wide", "entry_args: {accumulate: f8}")))
    assert type(err) is E.EntryPointNotAllowed
    assert "fkc_s4_evil" not in sys.modules and not marker.exists()


# -- what a declaration is -----------------------------------------------------------------


F = "runtime.kernels.cpu.contracts.factories"
UNDECLARED = E.EntryPointNotDeclared


@pytest.mark.parametrize(
    ("entry", "args", "rule", "says"),
    [
        (f"{F}:_ufunc", ARGS, UNDECLARED, "not declared"),  # a helper, not a factory
        (f"{F}:compute_dtype", ARGS, UNDECLARED, "defined in 'runtime.dtypes'"),  # imported
        (f"{F}:np", ARGS, UNDECLARED, "module"),
        (f"{F}:COMPUTE", ARGS, UNDECLARED, "dict"),
        (f"{F}:BuiltKernel", ARGS, UNDECLARED, "type"),
        (f"{F}:__builtins__", ARGS, UNDECLARED, "dict"),
        (f"{F}:np.exp", None, E.BadEntryPoint, "one identifier"),
        (f"{F}:__import__('os')", ARGS, E.BadEntryPoint, "one identifier"),
        (f"'{F}:'", ARGS, E.BadEntryPoint, "one identifier"),
        (f"{F}:no_such", ARGS, E.EntryPointUnresolved, "no function"),
        ("runtime.no_such_module:unary", ARGS, E.EntryPointUnresolved, "cannot import"),
        ("os:system", None, E.EntryPointNotAllowed, "outside fuel's packages"),
        ("runtime.kernels.cpu.alternatives:_add_bias_row", ARGS, E.BadEntryArgs, "kernel entry"),
        (FACTORY, None, E.BadEntryArgs, "kernel factory"),
    ],
)
def test_fuel_entry_points(
    base: str, write: Write, entry: str, args: str | None, rule: type[FkcError], says: str
) -> None:
    err = _refused(write(_contract(base, entry, args)))
    assert type(err) is rule and says in err.message, err


@pytest.mark.parametrize(
    ("entry", "allow"),
    [("os:system", "os"), ("subprocess:run", "subprocess"), ("builtins:exec", "builtins")],
)
def test_an_allowed_foreign_package_still_needs_declarations(
    base: str, write: Write, entry: str, allow: str
) -> None:
    err = _refused(write(_contract(base, entry, None)), allow=(allow,))
    assert type(err) is E.EntryPointNotDeclared


def test_a_third_party_package_declares_its_factory_and_kernel(
    base: str, write: Write, site: Path
) -> None:
    _module(site, "fkc_s4_lib.impl", DECLARED)
    allow = ("fkc_s4_lib",)
    factory = _contract(base, "fkc_s4_lib.impl:exp_wide", "entry_args: {accumulate: float64}")
    table = KernelBindingTable()
    with pytest.warns(UserWarning, match="UNAUDITED"):
        import_glob(write(factory, "f.fkc.md"), table, allow=allow, ledger=None)
    assert table.lookup("exp", ("f32", "f32"), "cpu").kernel.__qualname__.startswith("exp_wide")
    kernel = _contract(base, "fkc_s4_lib.impl:exp_kernel", None)
    table = KernelBindingTable()
    with pytest.warns(UserWarning, match="UNAUDITED"):
        import_glob(write(kernel, "k.fkc.md"), table, allow=allow, ledger=None)
    assert table.lookup("exp", ("f32", "f32"), "cpu").kernel.__name__ == "exp_kernel"


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("fkc_s4_pkg:exp_wide", "defined in 'fkc_s4_pkg.impl'"),  # re-exported by the package
        ("fkc_s4_pkg.impl:alias", "alias of"),
        ("fkc_s4_pkg.impl:undeclared", "not declared"),
        ("fkc_s4_pkg.impl:system", "builtin_function_or_method"),
        ("fkc_s4_pkg.impl:run", "defined in 'subprocess'"),
    ],
)
def test_a_third_party_name_that_is_not_its_declaration_is_refused(
    base: str, write: Write, site: Path, tmp_path: Path, entry: str, says: str
) -> None:
    marker = tmp_path / "MARKER"
    extra = (
        "from os import system\nfrom subprocess import run\n\n"
        f"def undeclared(dtypes, accumulate):\n    open({str(marker)!r}, 'w').write('ran')\n"
    )
    _module(site, "fkc_s4_pkg.impl", DECLARED + extra)
    (site / "fkc_s4_pkg" / "__init__.py").write_text("from fkc_s4_pkg.impl import exp_wide\n")
    text = _contract(base, entry, "entry_args: {accumulate: float64}")
    err = _refused(write(text), allow=("fkc_s4_pkg",))
    assert type(err) is E.EntryPointNotDeclared and says in err.message, err
    assert not marker.exists()


def test_a_module_getattr_is_not_consulted(base: str, write: Write, site: Path) -> None:
    source = (
        "from fkc_s4_hook.impl import exp_wide\n\ndef __getattr__(name):\n    return exp_wide\n"
    )
    _module(site, "fkc_s4_hook.impl", DECLARED)
    (site / "fkc_s4_hook" / "__init__.py").write_text(source)
    text = _contract(base, "fkc_s4_hook:anything", "entry_args: {accumulate: float64}")
    err = _refused(write(text), allow=("fkc_s4_hook",))
    assert type(err) is E.EntryPointUnresolved and "no function 'anything'" in err.message


def test_resolution_returns_the_declaration() -> None:
    found = resolve_entry_point(FACTORY)
    assert found.kind == "factory" and found.fn.__name__ == "unary"
    assert resolve_entry_point("runtime.kernels.cpu.alternatives:_add_bias_row").kind == "kernel"


# -- the decorators --------------------------------------------------------------------------


def _fn(dtypes: object) -> None:
    pass


def test_the_decorators_return_the_function_unchanged() -> None:
    assert kernel_factory(_fn) is _fn and declared_kind(_fn) == "factory"
    assert kernel_entry(_fn) is _fn and declared_kind(_fn) == "kernel"
    assert declared_kind(print) is None and declared_kind(object()) is None


@pytest.mark.parametrize(
    "thing",
    [print, type("K", (), {}), lambda dtypes: None, _fn.__get__(object())],
    ids=["builtin", "class", "lambda", "bound-method"],
)
def test_the_decorators_declare_module_level_functions_only(thing: object) -> None:
    with pytest.raises(TypeError, match="kernel_factory"):
        kernel_factory(thing)  # type: ignore[arg-type]


def test_a_nested_function_cannot_be_declared() -> None:
    def inner(dtypes: object) -> None:
        pass

    with pytest.raises(TypeError, match="module-level"):
        kernel_entry(inner)


def test_a_declaration_line_is_not_part_of_the_revision(site: Path) -> None:
    body = "def f(dtypes, k):\n    return k + 1\n"
    _module(site, "fkc_s4_rev_a", body)
    _module(
        site,
        "fkc_s4_rev_b",
        "from runtime.contracts import kernel_factory\n\n\n@kernel_factory\n" + body,
    )
    import fkc_s4_rev_a  # type: ignore[import-not-found]
    import fkc_s4_rev_b  # type: ignore[import-not-found]

    assert inspect.getsource(fkc_s4_rev_b.f).startswith("@kernel_factory")
    assert _source_of(fkc_s4_rev_b.f) == _source_of(fkc_s4_rev_a.f) == body


# -- entry_args are data -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("{ufunc: 2024-01-01, compute: f64}", "is a date"),
        ("{ufunc: !!binary aGVsbG8=, compute: f64}", "is a bytes"),
        ("{ufunc: !!set {a, b}, compute: f64}", "is a set"),
        ("{ufunc: !!omap [{a: 1}], compute: f64}", "is a tuple"),
        ("{ufunc: [[[[[1]]]]], compute: f64}", "nests deeper than 4"),
        ("{ufunc: {1: exp}, compute: f64}", "key that is not a string"),
        ("{ufunc: exp, dtypes: [f32]}", "dtype key"),
        ("{ufunc: exp, 2x: f64}", "not an identifier"),
        ("[ufunc, exp]", "is a mapping"),
    ],
)
def test_entry_args_that_are_not_data_are_refused(
    base: str, write: Write, args: str, says: str
) -> None:
    text = base.replace("{ufunc: exp, compute: f64}", args)
    err = _refused(write(text))
    assert type(err) is E.BadEntryArgs and says in err.message, err
    assert err.line == text[: text.index("entry_args:")].count("\n") + 1


def test_entry_args_may_nest_lists_and_mappings(base: str, write: Write, site: Path) -> None:
    _module(
        site,
        "fkc_s4_data",
        "from runtime.contracts import kernel_factory\n\nSEEN = []\n\n"
        "@kernel_factory\ndef f(dtypes, table, flag, none):\n    SEEN.append((table, flag, none))\n"
        "    return lambda inputs, outputs, params: None\n",
    )
    args = "entry_args: {table: {a: [1, 2.5, {b: [x]}]}, flag: true, none: null}"
    text = _contract(base, "fkc_s4_data:f", args)
    with pytest.warns(UserWarning, match="UNAUDITED"):
        import_glob(write(text), KernelBindingTable(), allow=("fkc_s4_data",), ledger=None)
    import fkc_s4_data  # type: ignore[import-not-found]

    assert fkc_s4_data.SEEN[0] == ({"a": [1, 2.5, {"b": ["x"]}]}, True, None)
