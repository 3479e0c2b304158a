"""The documentation site (mkdocs + material + mkdocstrings, ``mkdocs.yml``; the ``docs`` extra).

* slow tier: ``mkdocs build --strict`` passes on the repository's docs, fails on a copy of them with links broken,
  naming each (so a broken link fails CI), and the built site has its pages and the results pages' plots;
* fast tier: every public function, class and method that the API pages (``docs/api/*.md``) render has a
  docstring, and every Python example of ``docs/losses.md`` runs and prints.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGES = ("shared_losses", "rl_curl", "nlp_qt", "fewshot", "paper_tables")
BUILD_TIMEOUT = 55  # seconds; a build takes about 5 s on 2 cores


# --------------------------------------------------------------------------------------------------------------
# Building the site (slow tier)
# --------------------------------------------------------------------------------------------------------------


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site``, with this interpreter (the project's .venv)."""
    try:
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError as e:  # a hard failure: scripts/setup.sh installs the extra, so CI always has it
        pytest.fail(f"{e}: install the docs extra (pip install -e '.[docs]', which scripts/setup.sh does)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # no banner about material's end of life in the output
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=BUILD_TIMEOUT, env=env)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The repository's site, built once in strict mode (a warning: a broken link, a missing anchor, a nav entry
    without its page, a docstring mkdocstrings cannot parse, fails the build)."""
    out = tmp_path_factory.mktemp("site") / "site"
    proc = mkdocs_build(ROOT / "mkdocs.yml", out)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


@pytest.mark.slow
def test_mkdocs_build_strict_passes(site):
    assert (site / "index.html").is_file()


def docs_copy(tmp_path: Path) -> Path:
    """A copy of the docs and mkdocs.yml in ``tmp_path`` (the packages linked beside them, for mkdocstrings)."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    for pkg in PACKAGES:
        (tmp_path / pkg).symlink_to(ROOT / pkg, target_is_directory=True)
    (tmp_path / "scripts").symlink_to(ROOT / "scripts", target_is_directory=True)  # mkdocs.yml's hooks
    return tmp_path


BROKEN_LINKS = [
    ("(getting_started.md)", "getting_startd.md"),  # a page that does not exist
    ("(losses.md)", "losses.md#no-such-heading"),  # a heading that does not exist
    ("(clusters.md)", "../scripts/setup.sh"),  # a file of the repository outside docs/: not in the site
]


@pytest.fixture(scope="module")
def broken_build(tmp_path_factory) -> subprocess.CompletedProcess:
    """A strict build of a copy of the docs whose index has every link of ``BROKEN_LINKS`` broken (one build for
    all of them: a strict build reports every warning before it aborts, and each is checked on its own line)."""
    tmp_path = tmp_path_factory.mktemp("broken_site")
    root = docs_copy(tmp_path)
    index = root / "docs" / "index.md"
    text = index.read_text()
    for broken, target in BROKEN_LINKS:
        assert broken in text, f"docs/index.md no longer links {broken}: pick another link for this test"
        text = text.replace(broken, f"({target})", 1)
    index.write_text(text)
    return mkdocs_build(root / "mkdocs.yml", tmp_path / "site")


@pytest.mark.slow
@pytest.mark.parametrize("broken,target", BROKEN_LINKS)
def test_mkdocs_build_strict_fails_on_a_broken_link(broken_build, broken, target):
    out = broken_build.stdout + broken_build.stderr
    assert broken_build.returncode != 0, f"a strict build passed with broken links:\n{out}"
    # each broken link is a warning of its own, naming the page and the link: any one of them fails a strict build
    warnings = [line for line in out.splitlines() if line.startswith("WARNING") and target in line]
    assert warnings and all("index.md" in line for line in warnings), out


class _Refs(HTMLParser):
    """The ``src`` of every ``<img>`` and the ``href`` of every ``<a>`` of a page."""

    def __init__(self):
        super().__init__()
        self.imgs: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img" and a.get("src"):
            self.imgs.append(a["src"])
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"])


def _local(page: Path, ref: str) -> Path | None:
    """The file of the built site that a relative ``ref`` of ``page`` points at (None: external or in-page)."""
    parts = urlsplit(ref)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    target = (page.parent / unquote(parts.path)).resolve()
    return target / "index.html" if ref.endswith("/") or target.is_dir() else target


def results_pages() -> list[str]:
    """The results pages that exist in docs/, as their paths there (results.md and results/*.md)."""
    pages = ["results.md"] if (DOCS / "results.md").is_file() else []
    return pages + sorted(str(p.relative_to(DOCS)) for p in (DOCS / "results").glob("*.md"))


def built(site: Path, page: str) -> Path:
    """The HTML file of the docs page ``page`` (``use_directory_urls``: ``x.md`` -> ``x/index.html``, ``d/index.md``
    -> ``d/index.html``)."""
    path = Path(page)
    return site / (path.parent if path.name == "index.md" else path.with_suffix("")) / "index.html"


@pytest.mark.slow
def test_site_has_the_pages_and_the_plots(site):
    for page in ["index.md", "getting_started.md", "losses.md", "equations.md", "rl_curl.md", "nlp_qt.md",
                 "fewshot.md", "clusters.md", "architecture.md", "adding_a_loss.md", "adding_a_task_or_data_set.md",
                 "api/index.md", "api/losses.md", "api/training.md", "api/data.md", "api/distributed.md",
                 "api/rl_curl.md", "api/nlp_qt.md", "api/fewshot.md", "api/paper_tables.md", *results_pages()]:
        assert built(site, page).is_file(), f"{page} was not built"
    # The API pages really hold the rendered reference, not an empty page.
    assert 'id="shared_losses.functional.debiased_nce"' in built(site, "api/losses.md").read_text()

    # Issue 46, item 5: no Sphinx role shows as text on an API page, and the roles link (to the object's anchor on
    # its API page); the equations are MathML, rendered offline, and no page loads a script from a CDN.
    roles, linked = [], 0
    for page in sorted((DOCS / "api").glob("*.md")):
        text = built(site, f"api/{page.name}").read_text()
        roles += [f"{page.name}: {m}" for m in re.findall(r":(?:func|class|meth|mod|data|attr):<code>[^<]*</code>",
                                                          text)]
        linked += len(re.findall(r'<a class="autorefs autorefs-internal" [^>]*href="[^"]*#(?:shared_losses|rl_curl|'
                                 r'nlp_qt|fewshot)\.', text))
    assert not roles, "Sphinx roles shown as text:\n" + "\n".join(roles[:20])
    assert linked >= 50, linked
    losses = built(site, "losses.md").read_text()
    assert losses.count("<math") >= 7 and "\\[" not in losses and "\\]" not in losses
    assert "<math" in built(site, "api/losses.md").read_text()  # the docstring's equation too
    assert not [p for p in site.rglob("*.html") if "cdn.jsdelivr.net" in p.read_text() or "mathjax" in
                p.read_text().lower()]

    # Every image and every link to a local file of the results pages resolves in the built site (the raw data
    # of docs/data is copied with the pages); the results pages under docs/results/ show at least one plot.
    missing, pngs = [], []
    for page in results_pages():
        html = built(site, page)
        refs = _Refs()
        refs.feed(html.read_text())
        for ref in refs.imgs + refs.links:
            target = _local(html, ref)
            if target is not None and not target.exists():
                missing.append(f"{page}: {ref}")
        pngs += [(page, ref) for ref in refs.imgs if urlsplit(ref).path.endswith(".png")]
    assert not missing, "links of the results pages that the built site lacks:\n" + "\n".join(missing)
    if any(p.startswith("results/") for p in results_pages()):
        assert pngs, "no <img> of a .png in the results pages"
        assert all(_local(built(site, page), ref).is_file() for page, ref in pngs)


# --------------------------------------------------------------------------------------------------------------
# Every public object the API pages render has a docstring (fast tier)
# --------------------------------------------------------------------------------------------------------------


def api_directives() -> list[tuple[str, str, list[str] | None]]:
    """``(page, dotted path, members or None)`` of every ``::: path`` of docs/api/*.md (``options: members:``)."""
    import yaml

    found = []
    for page in sorted((DOCS / "api").glob("*.md")):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"^:::\s+(\S+)\s*$", line)
            if not m:
                continue
            block = []
            for nxt in lines[i + 1:]:
                if not nxt.startswith(" ") or not nxt.strip():
                    break
                block.append(nxt)
            options = (yaml.safe_load("\n".join(block)) or {}).get("options", {}) if block else {}
            found.append((page.name, m.group(1), options.get("members")))
    return found


def _public(name: str) -> bool:
    return not name.startswith("_")  # mkdocs.yml's filter "!^_"


def _documented_class(cls) -> bool:
    """Whether the class's source has a docstring, or its ``__init__`` has one (``merge_init_into_class``). From
    the source, as mkdocstrings reads it: ``@dataclass`` fills ``__doc__`` with the signature when there is none."""
    node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    init = cls.__dict__.get("__init__")
    return bool(ast.get_docstring(node)) or bool(inspect.isfunction(init) and (init.__doc__ or "").strip())


def _methods(cls):
    """The public methods and properties a class defines itself (what mkdocstrings shows: no inherited ones)."""
    for name, value in vars(cls).items():
        if not _public(name):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            yield name, value.fget
        elif inspect.isfunction(value):
            yield name, value


def _where(obj) -> str:
    """``path:line`` of an object's definition, relative to the repository."""
    try:
        path = Path(inspect.getsourcefile(obj)).resolve()
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return "?"
    return f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"


def missing_docstrings() -> list[str]:
    """Each rendered public function, class, method or property (and module) without a docstring of its own
    (not one inherited from a base class: mkdocstrings shows only the object's own), as
    ``dotted.name (kind, file:line; docs/api page)``."""
    missing = []
    for page, path, members in api_directives():
        module = importlib.import_module(path)
        if not (module.__doc__ or "").strip():
            missing.append(f"{path} (module, {_where(module)}; {page})")
        if members is None:
            names = [n for n, v in vars(module).items() if _public(n) and (inspect.isfunction(v) or inspect.isclass(v))
                     and getattr(v, "__module__", None) == path]
        else:
            names = list(members)
            absent = [n for n in names if not hasattr(module, n)]
            assert not absent, f"docs/api/{page} lists {absent} of {path}, which does not define them"
        for name in names:
            obj = getattr(module, name)
            where = f"{path}.{name}"
            if inspect.isclass(obj):
                if not _documented_class(obj):
                    missing.append(f"{where} (class, {_where(obj)}; {page})")
                missing += [f"{where}.{m} (method, {_where(f)}; {page})" for m, f in _methods(obj)
                            if not (f.__doc__ or "").strip()]
            elif callable(obj) and not (getattr(obj, "__doc__", None) or "").strip():
                missing.append(f"{where} (function, {_where(obj)}; {page})")
    return missing


def test_every_rendered_public_object_has_a_docstring():
    assert api_directives(), "docs/api/*.md render nothing"
    missing = missing_docstrings()
    assert not missing, f"{len(missing)} public objects on the API pages without a docstring:\n" + "\n".join(missing)


# --------------------------------------------------------------------------------------------------------------
# The examples of docs/losses.md run (fast tier)
# --------------------------------------------------------------------------------------------------------------


def python_blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """``(line, code, output)`` of every fenced ```python block of ``page``; ``output`` is the ```text block that
    follows it (before the next ```python block), or None."""
    blocks, lines = [], page.read_text().splitlines()
    fences = []  # (language, first line of the body, body)
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            fences.append((m.group(1), start + 1, "\n".join(body)))
        i += 1
    for k, (lang, line, body) in enumerate(fences):
        if lang == "python":
            nxt = fences[k + 1] if k + 1 < len(fences) else None
            blocks.append((line, body, nxt[2] if nxt and nxt[0] == "text" else None))
    return blocks


NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def same_output(got: str, shown: str, rel: float = 1e-3, abs_: float = 2e-4) -> bool:
    """The printed output equals the shown one: the same text, the numbers within a rounding of the last digit
    (another CPU's kernels may move the fourth decimal)."""
    got, shown = got.strip().split(), shown.strip().split()
    if [NUMBER.sub("#", w) for w in got] != [NUMBER.sub("#", w) for w in shown]:
        return False
    a = [float(x) for w in got for x in NUMBER.findall(w)]
    b = [float(x) for w in shown for x in NUMBER.findall(w)]
    return all(abs(x - y) <= max(abs_, rel * abs(y)) for x, y in zip(a, b))


LOSS_EXAMPLES = python_blocks(DOCS / "losses.md")


def test_losses_page_has_examples():
    assert len(LOSS_EXAMPLES) >= 6, "docs/losses.md should show every loss with an example"


@pytest.mark.parametrize("line,code,shown", LOSS_EXAMPLES, ids=[f"losses.md:{b[0]}" for b in LOSS_EXAMPLES])
def test_losses_page_example_runs(line, code, shown, one_torch_thread):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/losses.md:{line}", "exec"), {"__name__": "__docs_example__"})
    got = out.getvalue()
    assert got.strip(), f"the example at docs/losses.md:{line} printed nothing"
    assert shown is not None, f"the example at docs/losses.md:{line} has no ```text block with its output after it"
    assert same_output(got, shown), f"docs/losses.md:{line} printed\n{got}\nbut the page shows\n{shown}"
