"""What one target needs of a manifest: the documents it reaches, and the secrets it does not.

`toolbridge run FILE --target NAME` builds only what the target reaches (its document, what that
refers to by `!ref`, transitively, and the manifest's `Runtime`s). An unresolved secret used only by
other documents (a model key when the target only calls a tool) is not asked for then.
"""

from __future__ import annotations

from ._analyzer import AnalyzedManifest, Diagnostic, _refs_in_model

__all__ = ["reached", "unneeded_secrets"]


def reached(analysis: AnalyzedManifest, document: str) -> set[str]:
    """The names of the documents `document` reaches (itself and every `Runtime` included)."""
    todo = [document, *(d.name for d in analysis.of_kind("Runtime"))]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        doc = analysis.docs.get(name)
        if name in seen or doc is None:
            continue
        seen.add(name)
        todo.extend(ref.name for ref in _refs_in_model(doc.model))
    return seen


def unneeded_secrets(analysis: AnalyzedManifest, document: str) -> list[Diagnostic]:
    """The unresolved-secret errors of documents that `document` does not reach."""
    needed = reached(analysis, document)
    out = []
    for diag in analysis.diagnostics:
        if diag.code != "ERR_MANIFEST_SECRET_UNRESOLVED":
            continue
        where = (diag.line, diag.column)
        owners = [
            name
            for name, doc in analysis.docs.items()
            if any((pos.line, pos.column) == where for pos in doc.source.values.values())
        ]
        if owners and not needed.intersection(owners):
            out.append(diag)
    return out
