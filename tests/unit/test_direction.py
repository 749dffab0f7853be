"""refarch's units import one another in one direction only.

A unit is a sub-package of refarch/ (a directory with its modules and
sub-packages) or a top-level module (refarch/run.py).  ``ORDER`` ranks them,
lowest first: a unit may import a unit below it, never one above it.  Every
import counts, those inside functions included (a function-level import is
still a dependency, only a deferred one); only those under
``if TYPE_CHECKING:`` are left out, since they never run.

Why: test_layout's no-circle check sees module-level imports only, and a
function-level import back (the gate reaching into the CI environments, the
run reaching into the clouds) let two units grow into one without anyone
deciding it.  With one order, where a new module goes is a decision the test
asks for, and an arrow back is named with its file and line.  Since modules
move between units to keep the order, every import of a refarch module must
also name one that exists (a function-level import left behind by a move
fails only when that function runs).
"""

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

from refarch.paths import ROOT

PACKAGE = ROOT / "refarch"

#: refarch's units, lowest first.  An entry that does not exist (yet) is
#: fine; a unit that exists and is not named here fails the test.
ORDER = (
    # low-level modules: errors, paths and pins, versions, commands, retries;
    # what a profile is made of (stalls, overrides, headroom, pressure)
    "errors",
    "paths",
    "version",
    "proc",
    "retry",
    "stall",
    "overrides",
    "headroom",
    "pressure",
    # the property registry (what a profile may set), below the profile
    "properties",
    "profile",
    "contract",
    # a run: who owns it, its id and directory, its teardown guards and
    # progress lines, child pytest runs
    "owner",
    "run",
    "lifecycle",
    "progress",
    "childrun",
    # judging a run's results: pure (no cloud, no tool)
    "judge",
    # what the suite drives: the tools, then the clouds that drive them,
    # then a cluster's lifecycle on a cloud
    "tools",
    "clouds",
    "cluster",
    "bench",
    # fault cases, the report, the pytest plugin, the suite's CI
    "faults",
    "report",
    "pytest",
    "ci",
    # the commands, and ``python -m refarch``
    "cli",
    "__main__",
    # the documentation's generated pages: they read every unit above
    "docs",
)

#: Arrows back (importer, imported) that are known and being removed; each
#: is reported by the test once it is gone so that it leaves this set too.
PENDING: set[tuple[str, str]] = set()


class Import(NamedTuple):
    """One import of a refarch module by a module of another unit."""

    source: str  # the importing unit
    target: str  # the imported unit
    path: Path  # the importing file
    line: int


def unit_of(dotted: str) -> str:
    """The unit of a dotted name below the package ("" for the package)."""
    return dotted.split(".", 1)[0]


def _walk(tree: ast.AST):
    """Every node below ``tree`` except those under ``if TYPE_CHECKING:``
    (their ``else:`` branch is walked: it runs)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            for node in child.orelse:
                yield node
                yield from _walk(node)
            continue
        yield child
        yield from _walk(child)


def imported_names(dotted: str, is_package: bool, tree: ast.Module, top: str):
    """(dotted name below the package, line) for each import of it in a
    module ``dotted`` of package ``top``: module level and inside functions,
    relative and absolute."""
    here = dotted.split(".") if dotted else []
    package = here if is_package else here[:-1]
    for node in _walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and (node.module == top or node.module.startswith(top + ".")):
                target = node.module.split(".")[1:]
            else:
                continue
            if target:
                yield ".".join(target), node.lineno
            else:  # from . import run, from refarch import run
                for alias in node.names:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(top + "."):
                    yield alias.name.split(".", 1)[1], node.lineno


def units(package: Path) -> set[str]:
    """The units of ``package``: its sub-packages and top-level modules."""
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    top_level = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    return subpackages | top_level


def modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """{dotted name below ``package`` ("" for itself): (file, whether it is
    a package's __init__)}."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        out[".".join(parts)] = (path, is_package)
    return out


def _all_imports(package: Path):
    """(importing module's dotted name, its file, imported dotted name,
    line) for every import of a module of ``package`` in it."""
    for dotted, (path, is_package) in modules(package).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, line in imported_names(dotted, is_package, tree, package.name):
            yield dotted, path, name, line


def imports(package: Path) -> list[Import]:
    """Every import in ``package`` of one unit by another."""
    out = []
    for dotted, path, name, line in _all_imports(package):
        source, target = unit_of(dotted), unit_of(name)
        if source and target and target != source:
            out.append(Import(source, target, path, line))
    return out


def unresolved(package: Path) -> list[tuple[Path, int, str]]:
    """(file, line, name) of each import of a module of ``package`` that
    does not exist (a module moved and an import left behind)."""
    known = modules(package)
    return [(path, line, name) for _, path, name, line in _all_imports(package) if name not in known]


def arrows_back(package: Path, order: tuple[str, ...]) -> list[Import]:
    """The imports of ``package`` that go from a unit to one not below it."""
    rank = {unit: i for i, unit in enumerate(order)}
    return [i for i in imports(package)
            if i.source in rank and i.target in rank and rank[i.source] < rank[i.target]]


def unranked(package: Path, order: tuple[str, ...]) -> list[str]:
    """The units of ``package`` that ``order`` does not name."""
    return sorted(units(package) - set(order))


def _where(imp: Import, root: Path) -> str:
    return f"{imp.path.relative_to(root)}:{imp.line}: {imp.source} -> {imp.target}"


def test_every_unit_is_in_the_order():
    missing = unranked(PACKAGE, ORDER)
    if missing:
        pytest.fail(f"units of refarch/ not in ORDER (rank them): {', '.join(missing)}", pytrace=False)


def test_imports_go_down_the_order():
    back = [i for i in arrows_back(PACKAGE, ORDER) if (i.source, i.target) not in PENDING]
    if back:
        pytest.fail("imports against ORDER (a lower unit importing a higher one):\n"
                    + "\n".join(_where(i, ROOT) for i in back), pytrace=False)


def test_every_import_of_the_package_names_one_of_its_modules():
    missing = [f"{path.relative_to(ROOT)}:{line}: refarch.{name}" for path, line, name in unresolved(PACKAGE)]
    if missing:
        pytest.fail("imports of refarch modules that do not exist:\n" + "\n".join(missing), pytrace=False)


def test_pending_arrows_are_still_there():
    found = {(i.source, i.target) for i in arrows_back(PACKAGE, ORDER)}
    gone = sorted(PENDING - found)
    assert not gone, f"arrows back no longer there (drop them from PENDING): {gone}"


def _write(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def fake(tmp_path) -> Path:
    """A package ``fake`` of three units: ``low``, ``high`` (imports low)
    and ``top`` (imports high); low imports high inside a function, and
    under ``if TYPE_CHECKING:``."""
    pkg = tmp_path / "fake"
    _write(pkg / "__init__.py")
    _write(pkg / "low" / "__init__.py")
    _write(pkg / "low" / "thing.py", (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..high import ignored\n"
        "\n"
        "def use():\n"
        "    from ..high.tool import helper\n"
        "    return helper\n"))
    _write(pkg / "high" / "__init__.py", "from fake.low import thing\n")
    _write(pkg / "high" / "tool.py", "from . import helper\n")
    _write(pkg / "top.py", "import fake.high.tool\n")
    return pkg


def test_the_checker_finds_an_arrow_back_inside_a_function(fake, tmp_path):
    back = arrows_back(fake, ("low", "high", "top"))

    assert [(i.source, i.target, i.path, i.line) for i in back] == [("low", "high", fake / "low" / "thing.py", 6)]
    assert _where(back[0], tmp_path) == "fake/low/thing.py:6: low -> high"
    # The other way round, high's module-level import of low is the arrow back.
    assert arrows_back(fake, ("high", "low", "top")) == [("high", "low", fake / "high" / "__init__.py", 1)]


def test_the_checker_names_a_unit_missing_from_the_order(fake):
    assert unranked(fake, ("low", "high", "top", "not-yet")) == []
    assert unranked(fake, ("low", "top")) == ["high"]


def test_the_checker_finds_an_import_of_a_module_that_does_not_exist(fake):
    assert unresolved(fake) == []
    _write(fake / "low" / "moved.py", "def use():\n    from ..high.gone import helper\nfrom .. import vanished\n")
    assert unresolved(fake) == [(fake / "low" / "moved.py", 2, "high.gone"), (fake / "low" / "moved.py", 3, "vanished")]
