"""What pip installs: the distributions' metadata checked against the code, statically.

The core (``setup.cfg`` at the root, distribution ``pyagentcore``) and each plugin under
``plugins/`` ship as a wheel and an sdist. Nothing here builds one (a fresh Python 3.12+ venv has
no setuptools, and the tests run offline): the checks read ``setup.cfg`` and ``MANIFEST.in`` and
compare them with the files the code opens, the entry points it declares, the docs and CI.
From an unpacked core sdist, ``plugins/`` and ``.ci/`` are absent and their checks skip.
"""

from __future__ import annotations

import ast
import configparser
import os
import re
from pathlib import Path
from typing import Dict, List, NamedTuple, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p for p in (ROOT / "plugins").glob("*") if (p / "setup.cfg").is_file())
DISTRIBUTIONS = [ROOT, *PLUGINS]
# The core's runtime dependencies (README: "requests, jsonschema, pluggy"); urllib3 is declared
# too because agentcore imports it directly (agentcore/_compat.py) and needs 1.26 at least.
CORE_REQUIREMENTS = {"requests", "urllib3", "jsonschema", "pluggy"}


def _name(dist: Path) -> str:
    return "core" if dist == ROOT else dist.name


def _setup_cfg(dist: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(dist / "setup.cfg", encoding="utf-8")
    return parser


def _lines(value: str) -> List[str]:
    """A multi-line setup.cfg value as its non-empty lines (configparser drops comment lines)."""
    return [line.strip() for line in value.splitlines() if line.strip()]


def _items(value: str) -> List[str]:
    """A setup.cfg list: one item a line or comma-separated."""
    return [item.strip() for line in _lines(value) for item in line.split(",") if item.strip()]


def _glob_regex(pattern: str) -> str:
    """A glob as setuptools and MANIFEST.in read it: ``*`` and ``?`` never cross a ``/``."""
    out = []
    for char in pattern:
        out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
    return "".join(out)


def _matches(path: str, pattern: str) -> bool:
    return re.fullmatch(_glob_regex(pattern), path) is not None


_NEVER_SHIPPED = {".git", ".venv", ".ci-venv", "node_modules", "__pycache__"}


def _files(folder: Path) -> List[str]:
    """The files under ``folder`` (relative, '/'-separated), without the folders no distribution
    ships and that can be large: .git, virtual environments, tool and bytecode caches, egg-info."""
    found: List[str] = []
    for here, folders, names in os.walk(folder):
        folders[:] = [
            d
            for d in folders
            if d not in _NEVER_SHIPPED and not d.endswith(".egg-info") and not (d[0] == "." and d.endswith("_cache"))
        ]
        found.extend((Path(here) / name).relative_to(folder).as_posix() for name in names)
    return sorted(found)


def _sdist_files(dist: Path) -> Set[str]:
    """The files of ``dist``'s folder that its sdist carries besides the packages: setuptools'
    defaults (README*, setup.cfg, pyproject.toml, tests/test*.py) and then MANIFEST.in's commands,
    in order (include, exclude, recursive-include, recursive-exclude, global-exclude, graft, prune)."""
    every = _files(dist)
    shipped = {f for f in every if _matches(f, "tests/test*.py") or re.fullmatch(r"README[^/]*", f)}
    shipped |= {f for f in ("setup.cfg", "pyproject.toml") if f in every}
    manifest = dist / "MANIFEST.in"
    text = manifest.read_text(encoding="utf-8") if manifest.is_file() else ""
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        command, args = words[0], words[1:]
        if command in ("include", "exclude"):
            hits = {f for f in every if any(_matches(f, p) for p in args)}
        elif command in ("recursive-include", "recursive-exclude"):
            folder, patterns = args[0].rstrip("/") + "/", args[1:]
            hits = {
                f for f in every if f.startswith(folder) and any(_matches(f.rsplit("/", 1)[-1], p) for p in patterns)
            }
        elif command in ("global-include", "global-exclude"):
            hits = {f for f in every if any(_matches(f.rsplit("/", 1)[-1], p) for p in args)}
        elif command in ("graft", "prune"):
            hits = {f for f in every if any(f.startswith(a.rstrip("/") + "/") for a in args)}
        else:
            raise AssertionError(f"{manifest}:{number}: command {command!r} is not understood by this test")
        if command.endswith("include") or command == "graft":
            shipped |= hits
        else:
            shipped -= hits
    return shipped


def _packages(dist: Path) -> Dict[str, Path]:
    """The import packages of ``dist`` (``[options.packages.find] include``) and their folders."""
    includes = _items(_setup_cfg(dist)["options.packages.find"]["include"])
    tops = sorted({i.split(".")[0] for i in includes})
    return {top: dist / top for top in tops}


def _package_data(dist: Path) -> Dict[str, List[str]]:
    section = _setup_cfg(dist)["options.package_data"]
    return {package: _items(patterns) for package, patterns in section.items()}


def _wheel_data_files(dist: Path) -> Set[str]:
    """The non-Python files of ``dist``'s packages that its wheel carries (``package_data``), as
    paths relative to ``dist``."""
    shipped = set()
    for package, patterns in _package_data(dist).items():
        folder = dist.joinpath(*package.split("."))
        for f in _files(folder):
            if any(_matches(f, p) for p in patterns):
                shipped.add(f"{folder.relative_to(dist).as_posix()}/{f}")
    return shipped


@pytest.mark.parametrize("dist", PLUGINS, ids=_name)
def test_a_plugin_sdist_carries_the_helpers_its_tests_import(dist: Path) -> None:
    # setuptools alone puts tests/test*.py in the sdist but not conftest.py, the helper modules
    # they import (bedrock_helpers, vertex_helpers) nor the scripts they start (the MCP test
    # servers, pg-server.sh): every test run from an unpacked sdist then stopped at collection.
    shipped = _sdist_files(dist)
    tests = [f for f in _files(dist) if f.startswith("tests/")]
    modules = [f for f in tests if _matches(f, "tests/test_*.py")]
    missing = [f for f in tests if f not in shipped and f not in modules]
    assert not missing or not any(m in shipped for m in modules), (
        f"{dist.name}'s sdist ships test modules without {missing}: add them to {dist.name}/MANIFEST.in"
    )


@pytest.mark.parametrize("dist", PLUGINS, ids=_name)
def test_a_plugin_ships_the_project_licence(dist: Path) -> None:
    # the plugins are MIT like the core, but their folders had no LICENSE: setuptools (which
    # refuses license_files outside the project folder) put no licence text in their wheels or sdists
    assert (dist / "LICENSE").is_file(), f"{dist.name} has no LICENSE file"
    assert (dist / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes(), f"{dist.name}/LICENSE differs"
    assert "LICENSE" in _sdist_files(dist), f"{dist.name}/MANIFEST.in does not include LICENSE"


@pytest.mark.parametrize("dist", PLUGINS, ids=_name)
def test_a_plugin_sdist_ships_no_test_that_needs_the_core_checkout(dist: Path) -> None:
    # Some agentcore-postgres tests import the core's test helpers (the session conformance suite,
    # _processes, _many_helpers) from the checkout's tests/ folder, which a plugin sdist cannot
    # carry: shipped, their ModuleNotFoundError stopped the sdist's whole test run at collection.
    core_helpers = {p.stem for p in (ROOT / "tests").glob("*.py")} - {"conftest"}
    own = {p.stem for p in (dist / "tests").glob("*.py")}
    needing = {}
    for shipped in sorted(f for f in _sdist_files(dist) if f.startswith("tests/") and f.endswith(".py")):
        imported: Set[str] = set()
        for node in ast.walk(ast.parse((dist / shipped).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
        if imported & core_helpers - own:
            needing[shipped] = sorted(imported & core_helpers - own)
    assert needing == {}, f"exclude these from {dist.name}/MANIFEST.in (or make them skip): {needing}"


def _files_the_tests_name() -> Set[str]:
    """The files the core's tests name by a path from the root (``ROOT / ".ci" / "run"``,
    ``parents[1] / "setup.cfg"`` ...), relative to the root; package modules left out."""
    named = set()
    chain = re.compile(r'(?:ROOT|REPO|parents\[1\]|parent\.parent)((?:\s*/\s*"[^"]+")+)')
    for source in (ROOT / "tests").glob("*.py"):
        for match in chain.finditer(source.read_text(encoding="utf-8")):
            path = "/".join(re.findall(r'"([^"]+)"', match[1]))
            if (ROOT / path).is_file() and path.split("/")[0] not in _packages(ROOT):
                named.add(path)
    return named


def test_the_core_sdist_carries_what_its_tests_read() -> None:
    # MANIFEST.in: the tests with their helpers and fixtures, the examples and the docs whose code
    # the tests run, and the files they name (test_ci_script.py reads .ci/run: without it, seven
    # tests of an unpacked sdist failed with FileNotFoundError). From an unpacked sdist,
    # everything present was shipped: the check holds by definition there.
    shipped = _sdist_files(ROOT)
    wanted = {f"tests/{f}" for f in _files(ROOT / "tests")}
    wanted |= {f"examples/{f}" for f in _files(ROOT / "examples") if f.endswith(".py")}
    wanted |= {f"docs/{f}" for f in _files(ROOT / "docs") if re.fullmatch(r"[^/]+\.rst|conf\.py", f)}
    wanted |= {"README.rst", "CHANGELOG.md", "CONTRIBUTING.md", "LICENSE"} | _files_the_tests_name()
    assert sorted(wanted - shipped) == []


def test_the_scan_for_files_the_tests_name_finds_the_ci_script() -> None:
    if (ROOT / ".ci").is_dir():
        assert {".ci/run", "setup.cfg", "pyproject.toml"} <= _files_the_tests_name()


@pytest.mark.parametrize("dist", DISTRIBUTIONS, ids=_name)
def test_every_data_file_of_a_package_is_in_its_wheel(dist: Path) -> None:
    # py.typed, the model catalogs (agentcore/data/models.json, agentcore_bedrock/models.json,
    # agentcore_vertex/data/models.json): a file missing from package_data is only missed once
    # installed from a wheel, never in the editable checkout the tests run from.
    present = {f"{top}/{f}" for top, folder in _packages(dist).items() for f in _files(folder) if not f.endswith(".py")}
    assert sorted(present - _wheel_data_files(dist)) == []
    assert any(f.endswith("/py.typed") for f in present), f"{_name(dist)} ships no py.typed"


_OPENS = [
    # resources.files("pkg").joinpath("rel") and resources.files("pkg") / "rel"
    re.compile(r'files\(\s*"(?P<package>[\w.]+)"\s*\)\s*(?:\.joinpath\(\s*"(?P<a>[^"]+)"\s*\)|/\s*"(?P<b>[^"]+)")'),
    # Path(__file__).with_name("name"): next to the module
    re.compile(r'Path\(__file__\)(?:\.resolve\(\))?\.with_name\(\s*"(?P<name>[^"]+)"\s*\)'),
]


def _opened_data_files(dist: Path) -> Set[str]:
    """The package files the code of ``dist`` opens by a package-relative path (relative to ``dist``)."""
    found = set()
    for folder in _packages(dist).values():
        for source in folder.rglob("*.py"):
            text = source.read_text(encoding="utf-8")
            for match in _OPENS[0].finditer(text):
                package = dist.joinpath(*match["package"].split("."))
                found.add((package / (match["a"] or match["b"])).relative_to(dist).as_posix())
            for match in _OPENS[1].finditer(text):
                found.add(source.with_name(match["name"]).relative_to(dist).as_posix())
    return found


@pytest.mark.parametrize("dist", DISTRIBUTIONS, ids=_name)
def test_the_data_files_the_code_opens_exist_and_ship(dist: Path) -> None:
    opened = _opened_data_files(dist)
    assert sorted(f for f in opened if not (dist / f).is_file()) == []
    assert sorted(opened - _wheel_data_files(dist)) == []


def test_the_scan_for_opened_data_files_finds_the_model_catalogs() -> None:
    # The scan above is only worth something while it still recognises how the code opens files.
    assert "agentcore/data/models.json" in _opened_data_files(ROOT)
    for plugin, catalog in [
        ("agentcore-bedrock", "agentcore_bedrock/models.json"),
        ("agentcore-vertex", "agentcore_vertex/data/models.json"),
    ]:
        if (ROOT / "plugins" / plugin).is_dir():
            assert catalog in _opened_data_files(ROOT / "plugins" / plugin)


@pytest.mark.parametrize("dist", DISTRIBUTIONS, ids=_name)
def test_every_module_folder_is_a_package_the_build_finds(dist: Path) -> None:
    # "packages = find:" skips a folder without __init__.py: its modules would be missing from
    # the wheel (the core uses find_namespace: and has no such folder either).
    for folder in _packages(dist).values():
        for source in folder.rglob("*.py"):
            assert (source.parent / "__init__.py").is_file(), f"{source.relative_to(dist)}: no __init__.py beside it"


def _entry_points(dist: Path) -> Dict[str, str]:
    section = _setup_cfg(dist)["options.entry_points"]
    points = {}
    for group, value in section.items():
        for line in _lines(value):
            name, _, target = line.partition("=")
            points[f"{group}:{name.strip()}"] = target.strip()
    return points


@pytest.mark.parametrize("dist", DISTRIBUTIONS, ids=_name)
def test_entry_points_name_objects_of_the_distribution(dist: Path) -> None:
    # Checked in the source (a plugin's own dependencies need not be installed here): the module
    # is one of the distribution's files, and the attribute, when named, is defined at its top.
    points = _entry_points(dist)
    assert points, f"{_name(dist)} declares no entry point"
    for where, target in points.items():
        module, _, attribute = target.partition(":")
        path = dist.joinpath(*module.split("."))
        source = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
        assert source.is_file(), f"{_name(dist)} entry point {where} = {target}: no module {module}"
        assert module.split(".")[0] in _packages(dist)
        if attribute:
            tree = ast.parse(source.read_text(encoding="utf-8"))
            defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            defined |= {
                t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
            }
            assert attribute in defined, f"{_name(dist)} entry point {where} = {target}: {module} has no {attribute}"
    if dist != ROOT:
        assert any(w.startswith("agentcore:") for w in points), f"{dist.name} is not in group 'agentcore'"


def test_the_console_script_is_a_callable_of_the_installed_core() -> None:
    import importlib

    module, _, attribute = _entry_points(ROOT)["console_scripts:agentcore"].partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))


class _Requirement(NamedTuple):
    """A requirement line, parsed as far as these checks need (no dependency on ``packaging``)."""

    name: str
    extras: str
    clauses: List[Tuple[str, Tuple[int, ...]]]  # ("<", (3,)), (">=", (1, 2)) ...
    marker: str


def _version(text: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in text.strip().split("."))


def _clauses(text: str) -> List[Tuple[str, Tuple[int, ...]]]:
    found = re.findall(r"(>=|<=|==|!=|>|<)\s*([\d.]+)", text)
    assert len(found) == text.count(",") + 1, f"{text!r}: a clause this test cannot read"
    return [(operator, _version(version)) for operator, version in found]


def _allows(clauses: List[Tuple[str, Tuple[int, ...]]], version: Tuple[int, ...]) -> bool:
    def pad(v: Tuple[int, ...]) -> Tuple[int, ...]:
        return v + (0,) * (4 - len(v))

    compare = {
        ">=": lambda a, b: a >= b,
        "<=": lambda a, b: a <= b,
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        ">": lambda a, b: a > b,
        "<": lambda a, b: a < b,
    }
    return all(compare[operator](pad(version), pad(bound)) for operator, bound in clauses)


def _requirements(dist: Path) -> List[_Requirement]:
    parsed = []
    for line in _lines(_setup_cfg(dist)["options"]["install_requires"]):
        match = re.fullmatch(r"([A-Za-z0-9._-]+)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?", line)
        assert match, f"{dist / 'setup.cfg'}: requirement {line!r} not understood"
        name, extras, specifier, marker = match.groups()
        parsed.append(_Requirement(name, extras or "", _clauses(specifier) if specifier else [], marker or ""))
    return parsed


def test_the_core_requires_only_its_light_dependencies() -> None:
    # Heavy dependencies belong in extras or plugins; `import agentcore` stays light.
    assert {r.name for r in _requirements(ROOT)} == CORE_REQUIREMENTS
    assert all(not r.extras and not r.marker for r in _requirements(ROOT))


def test_the_dependency_floors_ci_tests_are_the_ones_the_metadata_states() -> None:
    constraints = ROOT / ".ci" / "floor-constraints.txt"
    if not constraints.is_file():
        pytest.skip(f"{constraints} is absent (an unpacked sdist has no .ci folder)")
    pinned = {}
    for line in _lines(constraints.read_text(encoding="utf-8")):
        name, _, version = line.partition("==")
        pinned[name.strip().lower()] = _version(version) + (0,) * (3 - len(_version(version)))
    floors = {}
    for requirement in _requirements(ROOT):
        lower = [v for operator, v in requirement.clauses if operator == ">="]
        assert len(lower) == 1, f"{requirement.name}: one >= floor expected"
        floors[requirement.name.lower()] = lower[0] + (0,) * (3 - len(lower[0]))
    assert pinned == floors


def test_the_distribution_name_agentcore_asks_for_its_version_is_setup_cfg_s() -> None:
    import agentcore

    assert agentcore._DISTRIBUTION == _setup_cfg(ROOT)["metadata"]["name"]


@pytest.mark.parametrize("dist", PLUGINS, ids=_name)
def test_a_plugin_requires_the_core_by_its_distribution_name_at_a_version_that_exists(dist: Path) -> None:
    # "agentcore" on the package index is another project: a plugin requiring it would install that.
    core = _setup_cfg(ROOT)["metadata"]
    on_core = [r for r in _requirements(dist) if r.name.lower() in ("agentcore", core["name"].lower())]
    assert [r.name for r in on_core] == [core["name"]], f"{dist.name} must require {core['name']} once"
    assert _allows(on_core[0].clauses, _version(core["version"])), f"{dist.name}: no core version it accepts"


def _python_requires(dist: Path) -> List[Tuple[str, Tuple[int, ...]]]:
    return _clauses(_setup_cfg(dist)["options"]["python_requires"])


def _python_floor(dist: Path) -> Tuple[int, ...]:
    (floor,) = [v for operator, v in _python_requires(dist) if operator == ">="]
    return floor


@pytest.mark.parametrize("dist", DISTRIBUTIONS, ids=_name)
def test_python_classifiers_agree_with_python_requires(dist: Path) -> None:
    classifiers = _lines(_setup_cfg(dist)["metadata"]["classifiers"])
    versions = [
        c.rsplit("::", 1)[1].strip()
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert [v for v in versions if not _allows(_python_requires(dist), _version(v))] == []
    if dist != ROOT:
        assert _python_floor(dist) >= _python_floor(ROOT), f"{dist.name} claims a Python the core does not support"


def test_mypy_and_ruff_check_the_oldest_python_the_core_claims() -> None:
    # Read with a regex: tomllib is Python 3.11+, and the two lines are simple.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    major, minor = _python_floor(ROOT)[:2]
    assert re.findall(r'^python_version = "([\d.]+)"', text, re.M) == [f"{major}.{minor}"]
    assert re.findall(r'^target-version = "py(\d+)"', text, re.M) == [f"{major}{minor}"]


def test_extras_the_docs_and_ci_name_exist() -> None:
    extras = set(_setup_cfg(ROOT)["options.extras_require"])
    named = set()
    for text in [
        (ROOT / "docs" / "installation.rst").read_text(encoding="utf-8"),
        (ROOT / "README.rst").read_text(encoding="utf-8"),
    ]:
        for group in re.findall(r"(?:pyagentcore|\.)\[([\w,-]+)\]", text):
            named.update(group.split(","))
    ci = ROOT / ".ci" / "run"
    if ci.is_file():
        for group in re.findall(r"'\.\[([\w,-]+)\]'", ci.read_text(encoding="utf-8")):
            named.update(group.split(","))
    assert named and sorted(named - extras) == []
