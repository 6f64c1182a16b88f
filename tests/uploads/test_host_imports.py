"""The example host imports only what any host may: the public API, the models,
redaction and the REST sub-app (held for lint-imports by a contract in pyproject.toml)."""

from __future__ import annotations

import ast
from pathlib import Path

import uploads

ALLOWED = {"retention.api", "retention.models", "retention.redaction", "retention.rest"}


def _retention_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of the reusable app in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "retention":
                found += [(node.lineno, f"retention.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0] == "retention"]


def _allowed(module: str) -> bool:
    if module in ALLOWED:
        return True
    return module.startswith("retention.rest.")


def test_host_imports__only_the_api_models_redaction_and_rest():
    root = Path(uploads.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert root / "demo" / "report.py" in files  # the scan reaches the demo's modules

    wrong = [
        f"{path.relative_to(root)}:{line} imports {module}"
        for path in files
        for line, module in _retention_imports(path)
        if not _allowed(module)
    ]

    assert wrong == []


def test_host_imports__the_scan_sees_a_forbidden_import(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from retention import api, conf\n"
        "from retention.engine.rules import run_rules\n"
        "import retention.selectors.holds\n"
        "from retention.rest.views import TenantApiView\n"
    )

    found = _retention_imports(probe)

    assert [m for _, m in found if not _allowed(m)] == [
        "retention.conf",
        "retention.engine.rules",
        "retention.selectors.holds",
    ]
