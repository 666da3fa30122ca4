"""The documentation: the README stays a five-minute read, docs/rules.md is the registry's, and the
site builds with MkDocs in strict mode (a broken link, anchor or nav entry fails)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import gen_rules_doc  # noqa: E402


def test_readme_is_short_and_points_at_the_docs():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for page in ("install", "compatibility", "explain", "run-verify", "rules", "pynative", "plan",
                 "reliability", "performance", "development"):
        assert f"(docs/{page}.md)" in text, page
        assert (REPO / "docs" / f"{page}.md").exists(), page


def test_rules_page_is_generated_from_the_registry():
    """Run `python tools/gen_rules_doc.py` when this fails (a rule changed)."""
    assert (REPO / "docs" / "rules.md").read_text(encoding="utf-8") == gen_rules_doc.render()


def test_every_nav_page_exists():
    """mkdocs.yml's nav names only pages that exist, and every page this branch wrote is in it (a page
    from another branch may build outside nav until the merge adds it: docs/development.md)."""
    import yaml

    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for n in node:
                yield from pages(n)
        elif isinstance(node, dict):
            for v in node.values():
                yield from pages(v)

    listed = set(pages(nav))
    assert all((REPO / "docs" / p).exists() for p in listed), listed
    mine = {p.name for p in (REPO / "docs").glob("*.md")}
    # the pages this branch wrote are all in nav; others may arrive from other branches first
    assert {"index.md", "install.md", "compatibility.md", "rules.md", "development.md", "units.md",
            "estimate.md"} <= listed
    assert listed <= mine


@pytest.mark.docs
def test_site_builds_strict(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    r = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=REPO,
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, NO_COLOR="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "WARNING" not in r.stderr, r.stderr[-3000:]
    for page in ("index.html", "rules/index.html", "compatibility/index.html", "DESIGN/index.html"):
        assert (tmp_path / "site" / page).exists(), page
    # the site reads offline (issue 36): no page loads a script, a style sheet or an image from the
    # network (the built-in theme took highlight.js from cdnjs); a link a reader may follow is fine
    import re

    loads = re.compile(r'<(?:script|img|link)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]*"')
    remote = {m.group(0) for page in (tmp_path / "site").rglob("*.html")
              for m in loads.finditer(page.read_text(encoding="utf-8"))}
    assert remote == set(), sorted(remote)[:5]
    assert (tmp_path / "site" / "estimate" / "index.html").exists()


@pytest.mark.docs
def test_strict_build_fails_on_a_broken_link_and_tolerates_a_page_outside_nav(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs" / "from-another-branch.md").write_text("# New page\n\nSee [install](install.md).\n")

    def build():
        return subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)

    r = build()
    assert r.returncode == 0, r.stderr[-3000:]
    with open(tmp_path / "docs" / "install.md", "a", encoding="utf-8") as fh:
        fh.write("\nSee [the missing page](no-such-page.md).\n")
    r = build()
    assert r.returncode != 0 and "no-such-page.md" in r.stderr, r.stderr[-3000:]


def test_version_has_one_place():
    """`swapwatch --version` is swapwatch.__version__, which setup.cfg reads (the wheel's metadata)."""
    import swapwatch

    r = subprocess.run([str(Path(sys.executable).parent / "swapwatch"), "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == f"swapwatch, version {swapwatch.__version__}\n"
    assert "version = attr: swapwatch.__version__" in (REPO / "setup.cfg").read_text(encoding="utf-8")
