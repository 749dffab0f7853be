"""refarch: deploys the Horovod reference architecture and proves it works.

The package holds the machinery of the validation suite: profiles, the local
cloud (podman "machines"), Terraform and Ansible drivers, run identity and
teardown, the smoke-job arithmetic and the results report.

With ``REFARCH_LOADED_MODULES`` naming a file, every process that imports
the package appends, when it exits, the dotted names below the package of
the modules it loaded (one per line: ``cli``, ``clouds.local``): the
role-scenario runner keys its reuse records on what a scenario's processes
really ran (:mod:`refarch.tools.rolecache`), and so do the suite's CI
environments (:mod:`refarch.ci.reuse`).  Several files, separated by
``os.pathsep``, each get the list (a role scenario run inside a CI
environment writes to both).
"""

import atexit as _atexit
import os as _os

__version__ = "0.1.0"


def _write_loaded_modules(paths: str) -> None:
    import sys

    names = sorted({name.partition(".")[2] for name in list(sys.modules)
                    if name.startswith(__name__ + ".")} | {"__init__", "__main__"})
    for path in filter(None, paths.split(_os.pathsep)):
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("".join(f"{name}\n" for name in names))
        except OSError:
            pass  # no record: the runner then keeps no reuse record


if _os.environ.get("REFARCH_LOADED_MODULES"):
    _atexit.register(_write_loaded_modules, _os.environ["REFARCH_LOADED_MODULES"])
