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
