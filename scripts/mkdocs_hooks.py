"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks``), run on every page after it is rendered:

* **Math without the internet.** arithmatex (``pymdownx.arithmatex``, generic mode) leaves TeX in
  ``<div class="arithmatex">\\[ ... \\]</div>`` and ``<span class="arithmatex">\\( ... \\)</span>``; each becomes
  MathML (``latex2mathml``) at build time, which browsers render with no script and no CDN.
* **Cross-references that link.** The docstrings name other objects with Sphinx's roles (``:func:`run_cli```,
  ``:class:`FrameReplay```), which mkdocstrings shows as text followed by code. Each becomes an autorefs
  reference to the object, resolved from the documented object it appears under (its module, its class, then the
  packages), so that mkdocs-autorefs links it where that object has an API page (and leaves plain code where it has
  none).
"""

from __future__ import annotations

import html
import importlib
import re

#: arithmatex's generic output: display math in a div, inline math in a span.
_MATH = re.compile(r'<(div|span) class="arithmatex">\s*(\\\[|\\\()(.*?)(\\\]|\\\))\s*</\1>', re.S)
#: a Sphinx role as mkdocstrings renders it: ``:func:<code>name</code>``.
_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):<code>~?([A-Za-z_][\w.]*)(\(\))?</code>")
#: the heading of a documented object: its id is the object's dotted path.
_HEADING = re.compile(r'<h\d id="([a-z_][\w]*(?:\.[\w]+)+)" class="doc doc-heading"')
PACKAGES = ("shared_losses", "rl_curl", "nlp_qt", "fewshot", "paper_tables")


def _tex_to_mathml(match: re.Match) -> str:
    from latex2mathml.converter import convert

    tag, tex = match.group(1), html.unescape(match.group(3))
    display = "block" if tag == "div" else "inline"
    try:
        mathml = convert(tex.strip(), display=display)
    except Exception:
        return f'<{tag} class="arithmatex"><code>{html.escape(tex.strip())}</code></{tag}>'
    return f'<{tag} class="arithmatex">{mathml}</{tag}>'


def canonical(path: str) -> str | None:
    """Where the object ``path`` (a.b.c) is defined, as the API pages name it (a class, function or method: its
    ``__module__`` and ``__qualname__``, so a name imported into another module points at its home; a module: its
    name; other values: ``path`` itself), or None if ``path`` names nothing importable."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
            return f"{module}.{qualname}"
        return path
    return None


def resolve(name: str, context: str | None) -> str | None:
    """The dotted path ``name`` means in the docstring of the object ``context`` (None: unknown): tried under the
    object, its class and its module (innermost first), as written, then under each package."""
    candidates = []
    if context:
        parts = context.split(".")
        candidates += [".".join(parts[:cut] + [name]) for cut in range(len(parts), 0, -1)]
    candidates.append(name)
    candidates += [f"{pkg}.{name}" for pkg in PACKAGES]
    for c in candidates:
        found = canonical(c) if c.split(".")[0] in PACKAGES else None
        if found is not None:
            return found
    return None


def _link_roles(text: str) -> str:
    out, last, context = [], 0, None
    headings = [(m.start(), m.group(1)) for m in _HEADING.finditer(text)]
    h = 0
    for m in _ROLE.finditer(text):
        while h < len(headings) and headings[h][0] < m.start():
            context = headings[h][1]
            h += 1
        name, call = m.group(1), m.group(2) or ""
        target = resolve(name, context)
        code = f"<code>{name.split('.')[-1] if m.group(0).count('~') else name}{call}</code>"
        out.append(text[last:m.start()])
        out.append(f'<autoref identifier="{target}" optional>{code}</autoref>' if target else code)
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def on_page_content(html_text: str, page, config, files) -> str:
    """Math to MathML, Sphinx roles to cross-references (see the module's docstring)."""
    html_text = _MATH.sub(_tex_to_mathml, html_text)
    return _link_roles(html_text)
