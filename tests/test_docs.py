"""The docs say what the code does: settings, check ids, links, the front page.

The settings reference (docs/reference.md) is held equal to the settings
``retention/conf.py`` defines, with their defaults, and to the check ids the
app's system checks can return, both read from the source: a setting or a
check added without its row fails here. The README stays a front page.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "retention"
DOCS = ROOT / "docs"
README = ROOT / "README.md"
REFERENCE = DOCS / "reference.md"

# Read by the example project from its environment, not by the app.
EXAMPLE_PROJECT_VARIABLES = {"RETENTION_LOG_FORMAT", "RETENTION_LOG_LEVEL"}

CHECK_ID = re.compile(r"""\bid\s*=\s*["'](retention\.[A-Z]\d{3})["']""")
TABLE_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)$")


def _section(text: str, heading: str) -> str:
    """The body of ``## heading`` up to the next heading of level two."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/reference.md has no '## {heading}' section"
    return match.group(1)


def _table_rows(section: str) -> dict[str, str]:
    """First-column code span → the rest of the row, for every table row."""
    rows: dict[str, str] = {}
    for line in section.splitlines():
        match = TABLE_ROW.match(line)
        if match:
            name = match.group(1)
            assert name not in rows, f"{name} is listed twice"
            rows[name] = match.group(2)
    return rows


def _conf_settings() -> dict[str, ast.expr]:
    """``RETENTION_<NAME>`` → the default expression of each setting declared in conf.py."""
    from retention.conf import RetentionSettings, Setting

    tree = ast.parse((APP / "conf.py").read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RetentionSettings"]
    found: dict[str, ast.expr] = {}
    for node in cls.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "Setting"
        ):
            ((target,),) = [node.targets]
            assert isinstance(target, ast.Name)
            found[f"RETENTION_{target.id}"] = node.value.args[0]
    # Every public attribute is a declared setting, each with what it means.
    public = {name: value for name, value in vars(RetentionSettings).items() if name[0] != "_"}
    assert all(isinstance(value, Setting) and value.__doc__ for value in public.values())
    assert {f"RETENTION_{name}" for name in public} == set(found), "one declaration a setting"
    return found


def _source_check_ids() -> set[str]:
    ids: set[str] = set()
    for path in APP.rglob("*.py"):
        if "migrations" not in path.parts:
            ids.update(CHECK_ID.findall(path.read_text()))
    return ids


def _same_expression(documented: str, source: ast.expr) -> bool:
    try:
        parsed = ast.parse(documented, mode="eval").body
    except SyntaxError:
        return False
    return ast.dump(parsed) == ast.dump(source)


def test_docs__settings_reference_lists_every_setting_of_conf_with_its_default():
    documented = _table_rows(_section(REFERENCE.read_text(), "Settings"))
    defined = _conf_settings()
    assert len(defined) > 20  # the parser found conf.py's settings
    assert sorted(set(defined) - set(documented)) == [], "settings missing from the reference"
    assert sorted(set(documented) - set(defined)) == [], "documented settings conf.py lacks"
    wrong = {}
    for name, rest in documented.items():
        default = re.match(r"\s*`([^`]*)`\s*\|", rest)
        if not default or not _same_expression(default.group(1), defined[name]):
            wrong[name] = ast.unparse(defined[name])
    assert wrong == {}, "defaults that differ from conf.py (conf.py's shown)"


def test_docs__check_reference_lists_every_check_id_the_app_can_return():
    documented = set(_table_rows(_section(REFERENCE.read_text(), "System checks")))
    defined = _source_check_ids()
    assert {"retention.E001", "retention.W001"} <= defined  # the parser found the checks
    assert sorted(defined - documented) == [], "check ids missing from the reference"
    assert sorted(documented - defined) == [], "documented check ids no check returns"


def test_docs__every_setting_and_check_id_the_docs_name_exists():
    from retention.conf import RETIRED_SETTINGS

    # A retired setting is named where the docs say it is no longer read (W009).
    retired = {f"RETENTION_{name}" for name in RETIRED_SETTINGS}
    settings = set(_conf_settings()) | EXAMPLE_PROJECT_VARIABLES | retired
    checks = _source_check_ids()
    stale = set()
    for path in [README, *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text()
        stale |= {
            f"{path.name}: {name}"
            for name in re.findall(r"\bRETENTION_[A-Z0-9_]*[A-Z0-9]\b", text)
            if name not in settings
        }
        stale |= {
            f"{path.name}: {check}"
            for check in re.findall(r"\bretention\.[EW]\d{3}\b", text)
            if check not in checks
        }
    assert sorted(stale) == []


def test_docs__readme_is_a_front_page_of_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


def test_docs__every_relative_link_of_the_readme_resolves_to_a_file():
    text = README.read_text()
    targets = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)
    targets += re.findall(r"^\[[^\]]+\]:\s*(\S+)", text, re.M)
    relative = [
        t.split("#", 1)[0]
        for t in targets
        if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")
    ]
    assert relative, "the README links into the docs"
    missing = [t for t in relative if not (ROOT / t).is_file()]
    assert missing == []


def test_docs__site_builds_with_warnings_as_errors(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "reference" / "index.html").is_file()


def test_docs__architecture_names_each_step_of_a_run_by_the_engine_function_that_does_it():
    # The table of verbs in docs/architecture.md is the map of a run: a
    # renamed or removed engine entry point must show up here, not rot there.
    import retention.engine
    import retention.tasks

    text = (DOCS / "architecture.md").read_text()
    verbs = re.findall(r"^\| `(\w+)` \|", text, flags=re.MULTILINE)
    assert {"run_start", "run_execute", "run_enqueue", "run_arm", "run_advance"} <= set(verbs)
    for verb in verbs:
        assert callable(getattr(retention.engine, verb, None)), f"retention.engine.{verb}"
    for path in re.findall(r"`retention\.tasks\.(\w+)`", text):
        assert callable(getattr(retention.tasks, path, None)), f"retention.tasks.{path}"
    assert "```mermaid" in text
