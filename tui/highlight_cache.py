"""The SQL editor's highlighting query, compiled once per process instead of once per document.

Textual's TextArea compiles its tree-sitter highlight query (`SyntaxAwareDocument.prepare_query`: about
40 ms of CPU for SQL's, the largest single cost of opening the workspace) each time it builds a document:
when the editor's language is set, and again on every `load_text` (a history entry, a snippet). The query
depends only on the language and the query's text, and a compiled tree-sitter `Query` is not changed by
using it (a match's state lives in the `QueryCursor` each search makes), so one compiled query can serve
every document of the process.

`install` puts a memo in front of that one public method: the only hook this module makes into Textual,
and a transparent one (a miss calls Textual's own method; a Textual without tree-sitter, or one that no
longer has the method, is left alone). tui.widgets.sql_editor installs it as it loads, and its `prime`
compiles SQL's query ahead of time: the warm template (tui.serve_warm.preload) compiles it once before it
forks and each tab's app finds it ready.
"""

from __future__ import annotations

from typing import Any

_compiled: dict[tuple[Any, str], Any] = {}
"""(tree-sitter Language, query text) -> compiled Query."""


def install() -> None:
    """Make SyntaxAwareDocument.prepare_query reuse what it compiled before (idempotent)."""
    try:
        from textual.document._syntax_aware_document import SyntaxAwareDocument
    except ImportError:  # no tree-sitter: documents are plain text and compile nothing
        return
    original = getattr(SyntaxAwareDocument, "prepare_query", None)
    if original is None or getattr(original, "_servedrill_memo", False):
        return

    def prepare_query(self: Any, query: str) -> Any:
        key = (self.language, query)
        compiled = _compiled.get(key)
        if compiled is None:
            compiled = _compiled[key] = original(self, query)
        return compiled

    prepare_query._servedrill_memo = True  # type: ignore[attr-defined]
    prepare_query.__doc__ = original.__doc__
    SyntaxAwareDocument.prepare_query = prepare_query  # type: ignore[method-assign]

