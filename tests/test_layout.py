"""The shape of the package (issue 13): modules of one concept each, none over 400 lines."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "retention"
MAX_LINES = 400


def test_layout__no_module_of_retention_is_over_400_lines():
    sizes = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.parts
    }

    assert len(sizes) > 50  # the walk found the package
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}
