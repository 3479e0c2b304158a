"""scripts/mkdocs_hooks.py on its own (the site's build test is slow): Sphinx roles become cross-references resolved
from the object they are documented under, and arithmatex's TeX becomes MathML."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
hooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hooks)


def test_roles_resolve_from_the_documented_object():
    assert hooks.resolve("run_cli", "shared_losses.training.cli.end_process") == "shared_losses.training.cli.run_cli"
    # imported into rl_curl.graphs, defined in rl_curl.replay: the API pages document it there
    assert hooks.resolve("FrameReplay.gather", "rl_curl.graphs.GraphedUpdate") == "rl_curl.replay.FrameReplay.gather"
    assert hooks.resolve("shared_losses", None) == "shared_losses"
    name = "shared_losses.training.runtime.local_path"
    assert hooks.resolve(name, None) == name
    assert hooks.resolve("no_such_thing", "shared_losses.training.cli") is None
    page = ('<h2 id="shared_losses.training.cli.end_process" class="doc doc-heading">end_process</h2>'
            '<p>see :func:<code>run_cli</code> and :class:<code>NoSuchClass</code></p>')
    out = hooks.on_page_content(page, None, None, None)
    assert '<autoref identifier="shared_losses.training.cli.run_cli" optional><code>run_cli</code></autoref>' in out
    assert ":func:" not in out and ":class:" not in out and "<code>NoSuchClass</code>" in out


def test_math_becomes_mathml():
    page = ('<div class="arithmatex">\\[\\ell_i = \\frac{1}{M}\\sum_m x\\]</div>'
            '<p>inline <span class="arithmatex">\\(\\tau^+\\)</span></p>')
    out = hooks.on_page_content(page, None, None, None)
    assert out.count("<math") == 2 and 'display="block"' in out and "\\[" not in out and "\\(" not in out
