"""The build commands: the caches, the toolset image, the QEMU virtual machines
and the role scenarios.
"""

from __future__ import annotations

import os
import sys

from ..errors import RefarchError
from ..run import RunDir


def cache(args) -> int:
    from ..clouds import caches

    if args.action == "list":
        for entry in caches.entries():
            print(caches.describe(entry))
        return 0
    removed, problems = caches.prune(keep=args.keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for entry in removed:
        print(f"{verb} {caches.describe(entry)}")
    for problem in problems:
        print(f"kept (in use): {problem}")
    if not removed:
        print("nothing to prune")
    return 0


def toolset(args) -> int:
    from ..paths import cache_dir
    from ..tools import toolset

    if args.action == "stage":
        return toolset.run_stage(args.env, args.posargs[1:] if args.posargs[:1] == ["--"] else args.posargs)
    if args.action == "tag":
        print(toolset.toolset_tag())
        return 0
    toolset.require_podman()
    log = cache_dir() / "toolset" / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"refarch: toolset image: building unless cached (log: {log})", file=sys.stderr, flush=True)
    tag, built = toolset.ensure_toolset(log, force=args.force)
    print(f"refarch: toolset image {'built' if built else 'cached'}: {tag}", file=sys.stderr, flush=True)
    print(tag)
    return 0


def vm(args) -> int:
    from ..clouds import vm

    if args.action == "up":
        volumes = {}
        for spec in args.volume:
            node, _, size = spec.partition("=")
            if not node or not size.isdigit():
                raise RefarchError(f"--volume {spec!r}: use NODE=GB, e.g. node1=1")
            volumes[node] = int(size)
        rundir = vm.up(args.nodes, volumes, seed_without_host_keys=args.seed_without_host_keys)
        print(f"run id: {rundir.run_id}")
        print(f"inventory: {rundir.path / 'inventory.yml'}")
        print(f"ssh: ssh -F {rundir.ssh_dir / 'config'} node1    destroy: ci/refarch destroy {rundir.run_id}")
        return 0
    vm.reboot(RunDir.open(args.run_id), args.node)
    print(f"{args.node} of {args.run_id} is back")
    return 0


def _vm_preflight() -> None:
    """The VM platform's host check, imported only when a VM scenario runs
    (the runner's loaded modules key the role scenarios' reuse records)."""
    from ..clouds import vm

    vm.preflight()


def roles(args) -> int:
    from ..tools import roles

    if args.list:
        for name in roles.scenarios():
            why = roles.skip_reason(name)
            print(f"{name}" + (f"  (skipped here: {why})" if why else ""))
        return 0
    if args.no_reuse:
        os.environ["REFARCH_ROLES_REUSE"] = "0"
    outcomes, out = roles.run_scenarios(args.scenario, vm_preflight=_vm_preflight)
    reused = [o.scenario for o in outcomes if o.reused_from]
    if reused:
        print(f"roles: reused (passed on this machine within 24 h with the same inputs): {', '.join(reused)}; "
              "--no-reuse runs them again")
    bad = [o.scenario for o in outcomes if o.status == "failed"]
    print(f"roles: {len(outcomes) - len(bad)} of {len(outcomes)} scenarios passed or skipped; logs, "
          f"results.json and junit.xml in {out}" + (f"; FAILED: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0
