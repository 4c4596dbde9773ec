# SPDX-License-Identifier: Apache-2.0
"""The committed API pages (docs/*.md) are what docs/generate.py writes from the docstrings."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()


@pytest.mark.parametrize("page", sorted(GEN.PAGES))
def test_page_is_up_to_date(page):
    path = DOCS / f"{page}.md"
    assert path.exists(), f"{path.name} is missing: run python docs/generate.py"
    assert path.read_text() == GEN.render(page), (
        f"docs/{path.name} is out of date with the docstrings: run python docs/generate.py"
    )


def test_every_public_name_has_a_section():
    for page, (_, modules, _) in GEN.PAGES.items():
        text = (DOCS / f"{page}.md").read_text()
        for modname in modules:
            for name in importlib.import_module(modname).__all__:
                assert f"### {modname}.{name}\n" in text, f"{modname}.{name} missing from {page}.md"


def test_index_is_up_to_date_and_links_every_page():
    path = DOCS / GEN.INDEX
    assert path.exists(), "docs/README.md (the index) is missing: run python docs/generate.py"
    text = path.read_text()
    assert text == GEN.render_index(), "docs/README.md is out of date: run python docs/generate.py"
    for page in GEN.PAGES:
        assert f"]({page}.md)" in text, f"the index does not link {page}.md"


@pytest.mark.parametrize("page", sorted(GEN.PAGES))
def test_no_restructuredtext_markup_and_no_prose_in_code(page):
    """A Returns entry written as a sentence renders as text, not as a code span; no ``x``/:func:."""
    text = GEN.render(page)
    assert "``" not in text.replace("```", ""), f"{page}.md keeps reST double backticks"
    assert ":func:`" not in text and ":class:`" not in text, f"{page}.md keeps reST roles"
    for line in text.splitlines():
        if line.startswith("- `"):
            name = line[3:].split("`", 1)[0]
            words = name.replace(", ", ",")
            assert " " not in words.strip(), f"{page}.md: prose rendered as code: {line}"


def test_prose_returns_render_as_text():
    doc = """Do it.

    Returns
    -------
    Same kind, dtype and shape as ``x``.

    Parameters
    ----------
    x : array
        The ``input``.
    """
    md = GEN._markdown(doc)
    assert "Same kind, dtype and shape as `x`." in md and "- `Same" not in md
    assert "- `x` : array" in md and "  The `input`." in md
