"""Typed errors of the kernel-contract importer: one class per validation rule.

Every error names the contract file and the line of the offending block or field, and carries
a stable rule code (`FKC-E<nn>`) that the format reference (`docs/kernel-contracts.md`) lists.
The importer raises these and nothing else for a malformed contract ("never crash"); the rule
list is derived from the classes (`all_rules`), and a test requires one test per rule.
"""

from __future__ import annotations

import warnings


class FkcError(Exception):
    """Base of every contract error: `path:line: [rule] message`."""

    rule: str = ""
    """Stable rule code; empty on the base and on grouping classes."""
    summary: str = ""
    """One line: what the rule requires."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path, self.line, self.message = str(path), int(line), message
        super().__init__(f"{self.path}:{self.line}: [{self.rule}] {message}")


# -- the document: front-matter, sections, fenced blocks, the YAML subset ------------------


class NotUtf8(FkcError):
    rule, summary = "FKC-E42", "a contract file is UTF-8 text"


class NoFrontMatter(FkcError):
    rule, summary = "FKC-E01", "a file starts with a `---` front-matter block that is closed"


class UnsupportedVersion(FkcError):
    rule, summary = "FKC-E02", "front-matter `fkc_version` is a supported version (1)"


class BadProvider(FkcError):
    rule, summary = "FKC-E03", "front-matter `provider` has backend, kernel_source, revision_base"


class UnclosedFence(FkcError):
    rule, summary = "FKC-E04", "every fenced code block is closed"


class SectionWithoutBlock(FkcError):
    rule, summary = "FKC-E05", "every `##` section holds exactly one ```fkc block (none found)"


class MultipleBlocks(FkcError):
    rule, summary = "FKC-E06", "every `##` section holds exactly one ```fkc block (two found)"


class BlockOutsideSection(FkcError):
    rule, summary = "FKC-E07", "an ```fkc block sits inside a `##` section"


class TabInYaml(FkcError):
    rule, summary = "FKC-E08", "restricted YAML: no tab characters"


class YamlAnchorOrAlias(FkcError):
    rule, summary = "FKC-E09", "restricted YAML: no anchors (&a) or aliases (*a)"


class YamlMergeKey(FkcError):
    rule, summary = "FKC-E10", "restricted YAML: no merge keys (<<)"


class YamlSyntax(FkcError):
    rule, summary = "FKC-E11", "a block is well-formed YAML: one mapping, no duplicate keys"


# -- the schema -----------------------------------------------------------------------------


class UnknownField(FkcError):
    rule, summary = "FKC-E12", "every field is one the format defines (catches typos)"


class MissingField(FkcError):
    rule, summary = "FKC-E13", "every required field is present"


class WrongType(FkcError):
    rule, summary = "FKC-E14", "every field has its type (unquoted yes/no/on/off are booleans)"


class DuplicateKernelName(FkcError):
    rule, summary = "FKC-E15", "kernel names are unique within a provider"


class UnknownOp(FkcError):
    rule, summary = "FKC-E16", "`op` names a fuel kernel op"


class UnknownDtype(FkcError):
    rule, summary = "FKC-E17", "dtypes are fuel dtype names or dtype classes"


class BadOperandName(FkcError):
    rule, summary = "FKC-E18", "operand names are identifiers, unique among a kernel's operands"


class BadLayout(FkcError):
    rule, summary = "FKC-E19", "layout flags are known values and coherent"


class BadRank(FkcError):
    rule, summary = "FKC-E20", "rank is an int >= 0, `any`, or a range `lo..hi` / `lo..`"


class BadShapeConstraint(FkcError):
    rule, summary = "FKC-E21", "shape constraints parse and name operands of the kernel"


class BadDtypeRule(FkcError):
    rule, summary = "FKC-E22", "dtype rules are a dtype, same_as(operand) or any(...), acyclic"


class BadShapeRule(FkcError):
    rule, summary = "FKC-E23", "output shape rules are same_as/broadcast/matmul/by_op over inputs"


class BadCostProvenance(FkcError):
    rule, summary = "FKC-E24", "cost declares its provenance: declared or judge_measured"


class UnknownCostClass(FkcError):
    rule, summary = "FKC-E25", "cost class is one of the ordered cost classes"


class BadCostExpression(FkcError):
    rule, summary = "FKC-E26", "cost expressions parse (+ - * / // % ** min max, parentheses)"


class UnknownCostSymbol(FkcError):
    rule, summary = "FKC-E27", "cost expressions use only bound shape symbols"


class IncompleteCost(FkcError):
    rule, summary = "FKC-E28", "flops and bytes are always given; declared costs give overhead"


class BadPrecisionBound(FkcError):
    rule, summary = (
        "FKC-E29",
        "precision bounds are non-negative numbers (max_ulp an integer) or `measured` (max_ulp, "
        "max_relative)",
    )


class IncoherentPrecision(FkcError):
    rule, summary = "FKC-E30", "`audited: false` claims nothing; an audited claim gives notes"


class BadDeterminism(FkcError):
    rule, summary = "FKC-E31", "determinism is known and agrees with the bit-stability claim"


class BadCaps(FkcError):
    rule, summary = "FKC-E32", "caps values are known and agree with the operand layouts"


class BadEntryPoint(FkcError):
    rule, summary = "FKC-E33", "entry_point is `package.module:function`, the function not dotted"


class EntryPointNotAllowed(FkcError):
    rule, summary = "FKC-E34", "entry points live in fuel's packages or an explicitly allowed one"


class EntryPointUnresolved(FkcError):
    rule, summary = "FKC-E35", "an entry point's module imports and has the name"


class BadEntryArgs(FkcError):
    rule, summary = "FKC-E36", "entry_args is data (scalars, lists, mappings) for a factory only"


class EntryPointNotDeclared(FkcError):
    rule = "FKC-E41"
    summary = "an entry point names a function its module declares (@kernel_factory/@kernel_entry)"


class FactoryFailed(FkcError):
    rule, summary = "FKC-E37", "a factory builds a callable kernel for every dtype of its fan-out"


# -- importing several files and registering -----------------------------------------------


class ProviderMismatch(FkcError):
    rule, summary = "FKC-E38", "files imported together declare the same provider"


class DuplicateRegistration(FkcError):
    rule, summary = "FKC-E39", "a kernel is registered at most once per binding key"


class NoContractFiles(FkcError):
    rule, summary = "FKC-E40", "an import names at least one existing *.fkc.md file"


def all_rules() -> list[type[FkcError]]:
    """Every rule class, in code order (derived from the subclasses, not a hand list)."""
    found: list[type[FkcError]] = []
    stack = list(FkcError.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.rule:
            found.append(cls)
    return sorted(found, key=lambda c: c.rule)


class UnverifiedClaimWarning(UserWarning):
    """A precision claim lacked a pass record in the verification ledger at the kernel's
    revision: the kernel was registered with the UNAUDITED guarantee instead."""


class LedgerWarning(UserWarning):
    """The verification ledger could not be read; every claim is treated as unproven."""


def warn(category: type[Warning], message: str) -> None:
    """Issue an import warning attributed to the caller of the importer."""
    warnings.warn(message, category, stacklevel=4)
