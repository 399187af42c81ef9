"""Fixes to xDSL 0.74 that fuel applies when its dialect loads (each says why; drop it once
the xDSL fuel pins has the fix).

1. The MLIR lexer's string-literal regex nests quantifiers (`(?:[^"...]+|\\..)*"`): on a
   string with no closing quote it backtracks exponentially, so a 40-character unterminated
   string in an `.mlir` file hangs the parser for hours. The same pattern with possessive
   quantifiers (Python >= 3.11) matches exactly the same literals and never backtracks.
"""

from __future__ import annotations

import re

from xdsl.utils.mlir_lexer import MLIRLexer

_STRING_LITERAL = r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"'


def apply() -> None:
    """Install the fixes (idempotent)."""
    MLIRLexer._unescaped_characters_regex = re.compile(_STRING_LITERAL)
