"""The fault-coverage matrix: for every check of ``tests/integration`` and
every property (:data:`refarch.properties.KNOWN`), the live fault
cases that must fail it (``must_fail`` of :data:`refarch.faults.catalogue.FAULTS`),
or ``unproven: <reason>`` (:data:`UNPROVEN`).
"Every check can fail" is this table with no empty row: a unit test fails
while a check or property has neither a proof nor a reason.

``python -m refarch.faults.coverage`` prints it; the docs page
``reference/faults.md`` carries it (``python -m refarch.docs --write``).  The HTML report shows, for
each check of a run, the fault cases that prove it (:func:`proofs`).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from ..paths import ROOT
from .catalogue import FAULTS

#: Where the checks live: every ``test_*`` function of these files.
CHECK_FILES = ("tests/integration/test_nodes.py", "tests/integration/test_cluster.py",
               "tests/integration/test_gpu.py", "tests/integration/test_smoke.py",
               "tests/integration/test_playbook.py")
#: Checks and properties no live fault case can fail here, with the reason.
UNPROVEN: dict[str, str] = {
    "test_gpus_healthy": "needs a GPU node; parsing proven on recorded outputs (tests/unit/test_gpu.py)",
    "test_cuda_version": "needs a GPU node; parsing proven on recorded outputs (tests/unit/test_gpu.py)",
    "test_nccl_version": "needs a GPU node; parsing proven on recorded outputs (tests/unit/test_gpu.py)",
    "test_horovod_built_with_nccl": "needs a GPU node; parsing proven on recorded outputs (tests/unit/test_gpu.py)",
    "test_dcgm_diagnostic": "needs a GPU node; parsing proven on recorded outputs (tests/unit/test_gpu.py)",
    "convergence.test_accuracy": "cannot separate training with and without averaging here: 0.9611-0.9722 "
                                 "against 0.9472-0.9583 (one test sample apart, calibration/local.yml); "
                                 "loss_gap and ranks_diverged fail F10 instead",
}

#: Checks a live test outside the fault catalogue fails on purpose, where
#: the local cloud cannot break them (QEMU virtual machines with their own
#: kernel and clock): check -> the test (path::function, what it breaks).
PROVEN_ELSEWHERE: dict[str, str] = {
    "test_shared_storage_root_squashed": "tests/vm/test_nfs.py::test_a_missing_root_squash_is_named (an NFS export "
                                         "without root_squash, on VMs: the local share is sshfs and skips it)",
    "test_time_synchronised": "tests/vm/test_time.py::test_a_clock_set_off_is_named (a guest clock 30 s fast, on "
                              "VMs: local nodes share the host's clock)",
}


def check_functions(root: Path = ROOT) -> list[tuple[str, ast.FunctionDef]]:
    """(file relative to ``root``, function) of every check: the ``test_*``
    functions of :data:`CHECK_FILES`, read with ``ast``, in file order (the
    checks page reads their docstrings and profile reads from them)."""
    out = []
    for rel in CHECK_FILES:
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        out += [(rel, n) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
                and n.name != "test_property"]
    return out


def checks(root: Path = ROOT) -> list[str]:
    """The check names (:func:`check_functions`) and the property ids,
    sorted, after them."""
    from .. import properties

    return [node.name for _rel, node in check_functions(root)] + sorted(properties.KNOWN)


def _target(fragment: str) -> str:
    """The check or property a ``must_fail`` fragment names:
    ``test_x[{n1}]`` -> ``test_x``, ``test_property[a.b]`` -> ``a.b``."""
    if fragment.startswith("test_property["):
        return fragment[len("test_property["):].rstrip("]")
    return fragment.split("[", 1)[0]


def matrix(root: Path = ROOT) -> dict[str, list[str]]:
    """Check or property id -> what proves it: fault ids and
    :data:`PROVEN_ELSEWHERE`'s test, else
    ``["unproven: <reason>"]``, else ``[]``."""
    proven: dict[str, list[str]] = {}
    for fault in FAULTS:
        for fragment in fault.must_fail:
            proven.setdefault(_target(fragment), []).append(fault.id)
    out = {}
    for name in checks(root):
        if proven.get(name) or name in PROVEN_ELSEWHERE:
            out[name] = sorted(set(proven.get(name, [])), key=[f.id for f in FAULTS].index)
            out[name] += [PROVEN_ELSEWHERE[name]] if name in PROVEN_ELSEWHERE else []
        elif name in UNPROVEN:
            out[name] = [f"unproven: {UNPROVEN[name]}"]
        else:
            out[name] = []
    return out


def gaps(root: Path = ROOT) -> list[str]:
    """Checks and properties with neither a proof nor a reason, and entries
    of :data:`UNPROVEN` that name no check or a check a fault case now
    proves."""
    found = matrix(root)
    out = [f"{name}: no live fault case fails it and no reason says why" for name, by in found.items() if not by]
    out += [f"UNPROVEN[{name}]: no such check or property" for name in UNPROVEN if name not in found]
    out += [f"UNPROVEN[{name}]: a fault case proves it now ({', '.join(found[name])})" for name in UNPROVEN
            if name in found and found[name] and not found[name][0].startswith("unproven")]
    return out


def proofs(check_id: str) -> list[str]:
    """What proves a check of a run (a pytest node id such as
    ``tests/integration/test_nodes.py::test_x[node1]`` or
    ``test_property[scaling.efficiency]``): the entries of :func:`matrix`."""
    name = check_id.rsplit("::", 1)[-1]
    return matrix().get(_target(name), [])


def table(root: Path = ROOT) -> str:
    """The matrix as a markdown table (no trailing newline)."""
    rows = ["| check or property | proven by |", "|---|---|"]
    for name, by in matrix(root).items():
        rows.append(f"| `{name}` | {', '.join(by) if by else '**nothing**'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refarch.faults.coverage",
                                     description="Which live fault case fails each check and property.")
    parser.parse_args(argv)
    print(table())
    for line in gaps():
        print(f"gap: {line}")
    return 1 if gaps() else 0


if __name__ == "__main__":
    sys.exit(main())
