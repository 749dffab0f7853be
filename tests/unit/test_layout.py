"""The package's layout as docs/explanation/layout.md describes it: every
sub-package and top-level module of refarch/ is named there, and the
modules import one another without a circle (module-level imports; those
under ``if TYPE_CHECKING:`` and inside functions are left out)."""

import ast
import re
from graphlib import CycleError, TopologicalSorter

from refarch.paths import ROOT

PACKAGE = ROOT / "refarch"


def _modules() -> dict[str, ast.Module]:
    """{dotted name below refarch ("" for the package): parsed module}."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def _imports(name: str, tree: ast.Module, is_package: bool, known: set[str]) -> set[str]:
    here = name.split(".") if name else []
    package = here if is_package else here[:-1]
    deps = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom):
                if sub.level:
                    base = package[:len(package) - sub.level + 1]
                    target = ".".join(base + (sub.module.split(".") if sub.module else []))
                elif sub.module and sub.module.startswith("refarch"):
                    target = sub.module.removeprefix("refarch").lstrip(".")
                else:
                    continue
                for alias in sub.names:
                    joined = f"{target}.{alias.name}".lstrip(".")
                    deps.add(joined if joined in known else target)
    return {d for d in deps if d in known and d != name}


def test_no_import_circle():
    modules = _modules()
    known = set(modules)
    packages = {n for n in modules if (PACKAGE / n.replace(".", "/") / "__init__.py").is_file()} | {""}
    graph = {n: _imports(n, tree, n in packages, known) for n, tree in modules.items()}
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_the_layout_page_names_every_sub_package_and_top_level_module():
    layout = (ROOT / "docs" / "explanation" / "layout.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\b([a-z_]+(?:/|\.py))", layout))
    subpackages = {p.parent.name + "/" for p in PACKAGE.glob("*/__init__.py")}
    top = {p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    missing = sorted((subpackages | top) - named)
    assert not missing, f"docs/explanation/layout.md does not name {', '.join(missing)} of refarch/"


#: The most lines a module of refarch/ has: past it, a module has grown two
#: concerns (each split so far was: the VM image from the VMs, the node
#: operations from the OpenStack project, the elastic job from the failure
#: proof).
MAX_MODULE_LINES = 400


def test_no_module_is_over_the_line_limit():
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split by concern): {long}"
