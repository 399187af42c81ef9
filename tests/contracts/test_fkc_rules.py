"""One test per validation rule, a test that every rule has one, and a no-crash sweep.

Each case mutates the valid contract of conftest.BASE (or builds a small scenario) and must
raise exactly its rule's error class, pointing at the line of the offending field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.binding_table import KernelBindingTable
from runtime.contracts import FkcError, all_rules, import_glob, load_contracts
from runtime.contracts import errors as E


@dataclass(frozen=True)
class Edit:
    """Replace `old` by `new` in the base text; the error must point at the line holding
    `at` (default: the first line of `new`)."""

    old: str
    new: str
    at: str | None = None
    allow: tuple[str, ...] = ()


def _line(text: str, needle: str, after: str = "") -> int:
    """1-based line of the first `needle` following the first `after`."""
    return text[: text.index(needle, text.index(after))].count("\n") + 1


EDITS: dict[type[FkcError], Edit] = {
    E.NoFrontMatter: Edit("---\nfkc_version", "fkc_version", at="fkc_version"),
    E.UnsupportedVersion: Edit("fkc_version: 1", "fkc_version: 7"),
    E.BadProvider: Edit("  revision_base: t1\n", "", at="provider:"),
    E.UnclosedFence: Edit("compute: f64}\n```", "compute: f64}\n", at="```fkc"),
    E.SectionWithoutBlock: Edit(
        "## exp (f32, f64)", "## empty\n\nnothing here\n\n## exp (f32, f64)", at="## empty"
    ),
    E.MultipleBlocks: Edit(
        "rounded once.\n",
        "rounded once.\n\n```fkc\nkernel: x\n```\n",
        at="```fkc\nkernel: test_exp",
    ),
    E.BlockOutsideSection: Edit(
        "```text\n## not a section\n```", "```fkc\nkernel: x\n```", at="```fkc"
    ),
    E.TabInYaml: Edit("op: exp", "op:\texp"),
    E.YamlAnchorOrAlias: Edit("  overhead_ns: 800", "  overhead_ns: &o 800"),
    E.YamlMergeKey: Edit("caps:\n", "caps:\n  <<: {in_place: false}\n", at="  <<:"),
    E.YamlSyntax: Edit("op: exp", "op: exp\nop: log", at="op: log"),
    E.UnknownField: Edit("op: exp", "op: exp\nblurb: hello", at="blurb"),
    E.MissingField: Edit("op: exp\n", "", at="```fkc\nkernel"),
    E.WrongType: Edit("  bit_stable: true", "  bit_stable: yes please"),
    E.UnknownOp: Edit("op: exp", "op: expp"),
    E.UnknownDtype: Edit("dtypes: [f32, f64]", "dtypes: [f32, f128]"),
    E.BadOperandName: Edit("  - name: out", "  - name: x", at="  - name: x\n    dtype_rule"),
    E.BadLayout: Edit("broadcast: accepted, offset", "broadcast: sometimes, offset"),
    E.BadRank: Edit("rank: any", "rank: 3..1"),
    E.BadShapeConstraint: Edit("shape: [same_as=out]", "shape: [same_as=nowhere]"),
    E.BadDtypeRule: Edit("dtype_rule: same_as(x)", "dtype_rule: same_as(y)"),
    E.BadShapeRule: Edit("shape_rule: same_as(x)", "shape_rule: transpose(x)"),
    E.BadCostProvenance: Edit("provenance: declared", "provenance: guessed"),
    E.UnknownCostClass: Edit("class: cheap_elementwise", "class: cheap"),
    E.BadCostExpression: Edit("flops: 10 * n", "flops: 10 * (n"),
    E.UnknownCostSymbol: Edit("flops: 10 * n", "flops: 10 * x.volume"),
    E.IncompleteCost: Edit("  overhead_ns: 800", "  overhead_ns: ~"),
    E.BadPrecisionBound: Edit("max_ulp: 2", "max_ulp: 1.5"),
    E.IncoherentPrecision: Edit("  audited: true", "  audited: false"),
    E.BadDeterminism: Edit("determinism: same_hardware_bitwise", "determinism: nondeterministic"),
    E.BadCaps: Edit("awkward_layout: handles_strided", "awkward_layout: requires_contiguous"),
    E.BadEntryPoint: Edit("factories:unary", "factories unary", at="entry_point"),
    E.EntryPointNotAllowed: Edit(
        "runtime.kernels.cpu.contracts.factories:unary", "os.path:join", at="entry_point"
    ),
    E.EntryPointUnresolved: Edit("factories:unary", "factories:no_such_factory", at="entry_point"),
    E.BadEntryArgs: Edit(
        "{ufunc: exp, compute: f64}", "{ufunc: 2024-01-01, compute: f64}", at="entry_args"
    ),
    E.EntryPointNotDeclared: Edit("factories:unary", "factories:_ufunc", at="entry_point"),
    E.FactoryFailed: Edit(
        "{ufunc: exp, compute: f64}", "{ufunc: no_such_ufunc, compute: f64}", at="```fkc\nkernel"
    ),
}
"""Rules shown by a one-field edit of the base contract."""


def _provider_mismatch(base: str, tmp: Path) -> tuple[list[Path], Path, int]:
    (tmp / "a.fkc.md").write_text(base)
    other = base.replace("revision_base: t1", "revision_base: t2").replace("test_exp", "other")
    (tmp / "b.fkc.md").write_text(other)
    return [tmp / "a.fkc.md", tmp / "b.fkc.md"], tmp / "b.fkc.md", _line(other, "provider:")


def _duplicate_registration(base: str, tmp: Path) -> tuple[list[Path], Path, int]:
    # Two sections naming the same kernel *function* at the same key: finalize would reject it.
    text = base.replace("\nentry_args: {ufunc: exp, compute: f64}", "").replace(
        "runtime.kernels.cpu.contracts.factories:unary", "fkc_dup_kernels:kernel"
    )
    twin = text[text.index("## exp") :].replace("test_exp", "test_exp_twin")
    (tmp / "fkc_dup_kernels.py").write_text(
        "from runtime.contracts import kernel_entry\n\n"
        "@kernel_entry\ndef kernel(inputs, outputs, params):\n    pass\n"
    )
    (tmp / "k.fkc.md").write_text(text + "\n" + twin)
    full = text + "\n" + twin
    return [tmp / "k.fkc.md"], tmp / "k.fkc.md", _line(full, "```fkc\nkernel: test_exp_twin")


def _duplicate_name(base: str, tmp: Path) -> tuple[list[Path], Path, int]:
    section = base[base.index("## exp") :].replace("## exp (f32, f64)", "## exp again")
    text = base + "\n" + section
    (tmp / "k.fkc.md").write_text(text)
    return (
        [tmp / "k.fkc.md"],
        tmp / "k.fkc.md",
        _line(text, "kernel: test_exp", after="## exp again"),
    )


def _not_utf8(base: str, tmp: Path) -> tuple[list[Path], Path, int]:
    data = base.replace("rounded once.", "rounded once \udcff.").encode("utf-8", "surrogateescape")
    (tmp / "k.fkc.md").write_bytes(data)
    return [tmp / "k.fkc.md"], tmp / "k.fkc.md", _line(base, "rounded once.")


def _no_files(base: str, tmp: Path) -> tuple[list[Path], Path, int]:
    return [tmp / "nothing-*.fkc.md"], tmp / "nothing-*.fkc.md", 0


SCENARIOS: dict[type[FkcError], Callable[[str, Path], tuple[list[Path], Path, int]]] = {
    E.ProviderMismatch: _provider_mismatch,
    E.DuplicateRegistration: _duplicate_registration,
    E.NoContractFiles: _no_files,
    E.NotUtf8: _not_utf8,
    E.DuplicateKernelName: _duplicate_name,
}
"""Rules that need more than one edit: (files to import, file blamed, line blamed)."""


def _import(paths: object, allow: tuple[str, ...] = ()) -> None:
    import_glob(paths, KernelBindingTable(), allow=allow, ledger=None)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::runtime.contracts.UnverifiedClaimWarning")
@pytest.mark.parametrize("rule", list(EDITS), ids=lambda r: f"{r.rule}-{r.__name__}")
def test_rule_by_edit(rule: type[FkcError], base: str, write: Callable[..., Path]) -> None:
    edit = EDITS[rule]
    assert edit.old in base, "the edit must apply to the base contract"
    text = base.replace(edit.old, edit.new, 1)
    path = write(text)
    with pytest.raises(FkcError) as info:
        _import(path, edit.allow)
    err = info.value
    assert type(err) is rule, f"expected {rule.__name__}, got {type(err).__name__}: {err}"
    assert err.path == str(path)
    assert err.line == _line(text, edit.at or edit.new.strip() or edit.old), str(err)
    assert str(err).startswith(f"{path}:{err.line}: [{rule.rule}] ")


@pytest.mark.filterwarnings("ignore::runtime.contracts.UnverifiedClaimWarning")
@pytest.mark.parametrize("rule", list(SCENARIOS), ids=lambda r: f"{r.rule}-{r.__name__}")
def test_rule_by_scenario(
    rule: type[FkcError], base: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    paths, blamed, line = SCENARIOS[rule](base, tmp_path)
    with pytest.raises(FkcError) as info:
        _import(paths, ("fkc_dup_kernels",))
    assert type(info.value) is rule, f"got {type(info.value).__name__}: {info.value}"
    assert info.value.path in (str(blamed), ", ".join(map(str, paths)))
    assert info.value.line == line, str(info.value)


def test_every_rule_has_a_test() -> None:
    """The rule list comes from the error classes: a new rule without a case fails here."""
    rules = all_rules()
    assert len(rules) >= 40
    assert len({r.rule for r in rules}) == len(rules), "rule codes are unique"
    covered = set(EDITS) | set(SCENARIOS)
    missing = [f"{r.rule} {r.__name__}" for r in rules if r not in covered]
    assert not missing, f"rules without a test: {missing}"
    assert all(r.summary for r in rules)


DOC = Path(__file__).resolve().parents[2] / "docs" / "kernel-contracts.md"


def test_format_reference_documents_every_rule_and_its_example_is_valid(tmp_path: Path) -> None:
    text = DOC.read_text()
    missing = [r.rule for r in all_rules() if f"| {r.rule} | `{r.__name__}` |" not in text]
    assert not missing, f"docs/kernel-contracts.md lacks rules {missing}"
    guide = (DOC.parent / "kernels.md").read_text()  # §7's complete user contract lives there
    example = guide[guide.index("`mykernels/mykernels/contracts/exp.fkc.md`") :]
    start = example.index("````markdown\n") + len("````markdown\n")
    example = example[start : example.index("\n````", start)]
    (tmp_path / "userlib.fkc.md").write_text(example)
    _, contracts = load_contracts(tmp_path / "userlib.fkc.md", allow=("mykernels",))
    assert [c.name for c in contracts] == ["fast_exp"]


def test_base_contract_is_valid(base: str, write: Callable[..., Path]) -> None:
    table = KernelBindingTable()
    with pytest.warns(UserWarning, match="UNAUDITED"):
        result = import_glob(write(base), table, ledger=None)
    assert [k.dtypes for k in result.kernels] == [("f32", "f32"), ("f64", "f64")]


@pytest.mark.filterwarnings("ignore::runtime.contracts.UnverifiedClaimWarning")
def test_malformed_files_never_crash(base: str, write: Callable[..., Path]) -> None:
    """Truncations and line deletions raise FkcError or import cleanly, never anything else."""
    lines = base.splitlines(keepends=True)
    variants = [base[:cut] for cut in range(0, len(base), 23)]
    variants += ["".join(lines[:i] + lines[i + 1 :]) for i in range(len(lines))]
    variants += [base.replace(": ", ":", k) for k in (3, 9, 20)]
    for i, text in enumerate(variants):
        path = write(text, f"v{i}.fkc.md")
        try:
            _import(path)
        except FkcError:
            pass
