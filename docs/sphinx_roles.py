"""A griffe extension for the API reference (mkdocs.yml loads it): Sphinx roles become links.

topkeval's docstrings are numpydoc, whose cross-references are Sphinx roles (``:func:`evaluate```,
``:meth:`~topkeval.results.Results.compare```); mkdocstrings would print them as they are written.
This turns each role into an autorefs reference to the object it names, found from the documented
object outward (its own members, its class, its module, then ``topkeval``): a link when that object
has a page, plain code when it has none; a name griffe cannot find stays plain code. A leading ``~``
shows the last part of the name only, as Sphinx does.
"""

from __future__ import annotations

import html
import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|attr|mod|data|exc|obj|const):`(?P<target>[^`]+)`")


def _find(obj: griffe.Object, loader: griffe.GriffeLoader, name: str) -> str | None:
    """The canonical path of the object ``name`` refers to, seen from ``obj``; None if unknown."""
    scopes = []
    scope: griffe.Object | None = obj
    while scope is not None:
        scopes.append(f"{scope.path}.{name}")
        scope = scope.parent
    scopes += [name, f"topkeval.{name}"]
    for path in scopes:
        try:
            found = loader.modules_collection[path]
            return found.canonical_path
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
    return None


def _rewrite(obj: griffe.Object, loader: griffe.GriffeLoader, text: str) -> str:
    def link(match: re.Match) -> str:
        target = match["target"].strip().lstrip("!").removesuffix("()")
        short = target.startswith("~")
        name = target.lstrip("~")
        shown = name.rsplit(".", 1)[-1] if short else name
        path = _find(obj, loader, name)
        if path is None:
            return f"`{shown}`"
        return f'<autoref identifier="{html.escape(path)}" optional><code>{html.escape(shown)}</code></autoref>'

    return ROLE.sub(link, text)


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring of the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = _rewrite(obj, loader, obj.docstring.value)
            stack.extend(member for member in obj.members.values() if not member.is_alias)
