"""The build commands: the caches, the toolset image, the QEMU virtual machines
and the role scenarios.
"""

from __future__ import annotations

import argparse
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


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands (cache, vm, roles, toolset) to the ``refarch``
    parser's subcommands."""

    ai = sub.add_parser("aio", help="the suite's OpenStack all-in-one, kept as a development cloud (up, down, list)",
                        description="up: start an all-in-one and keep it (a profile with openstack.all_in_one uses "
                                    "a kept one of its mode); down RUN_ID: stop it, nothing of it left; list: the "
                                    "running ones")
    ai.add_argument("action", choices=["up", "down", "list"])
    ai.add_argument("run_id", nargs="?", help="down: the all-in-one's run id (aio-...)")
    ai.add_argument("--mode", choices=["fake", "guests"], default="guests",
                    help="up: fake servers (API only) or real guests (default guests)")
    ai.add_argument("--profile", default=None,
                    help="up: the profile whose flavor, image and network it makes (default openstack-aio for fake, "
                         "openstack-aio-guests for guests)")
    ai.set_defaults(func=aio_command)
    cc = sub.add_parser("cache", help="list or prune the node images and wheelhouses (one per pin set)",
                        description="node images (podman) and wheelhouses (~/.cache/refarch): list them, or "
                                    "prune all but the current pins' and the KEEP newest others")
    cc.add_argument("action", choices=["list", "prune"])
    cc.add_argument("--keep", type=int, default=1, help="with prune: newest other entries kept per kind (default 1)")
    cc.add_argument("--dry-run", action="store_true", help="with prune: only say what would go")
    cc.set_defaults(func=cache)
    v = sub.add_parser("vm", help="QEMU virtual machines with a real kernel (the nfs scenario: cloud-init boot and NFS)",
                       description="up: boot VMs from the cached VM image with cloud-init seeds rendered by "
                                   "Terraform, kept until `refarch destroy RUN_ID`; reboot: reboot one and wait")
    v.add_argument("action", choices=["up", "reboot"])
    v.add_argument("run_id", nargs="?", help="reboot: the VM run")
    v.add_argument("--nodes", type=int, default=1, choices=range(1, 5), help="up: how many VMs (1-4)")
    v.add_argument("--volume", action="append", default=[], metavar="NODE=GB", help="up: an extra disk (/dev/vdb)")
    v.add_argument("--seed-without-host-keys", action="store_true",
                   help="up: drop the host keys from the seed (proves the strict SSH check notices)")
    v.add_argument("--node", default="node1", help="reboot: which VM")
    v.set_defaults(func=vm)
    ro = sub.add_parser("roles", help="test every Ansible role on its own with Molecule (tox -e molecule)",
                        description="molecule test of each scenario in descriptors/ansible/molecule (one per role), "
                                    "one at a time; Ctrl-C destroys the running scenario's nodes")
    ro.add_argument("-s", "--scenario", action="append", default=[], metavar="NAME",
                    help="run only this scenario (repeatable); default all")
    ro.add_argument("--list", action="store_true", help="list the scenarios and which this host skips")
    ro.add_argument("--no-reuse", action="store_true",
                    help="run every scenario, also those that passed here within 24 h with the same inputs "
                         "(REFARCH_ROLES_REUSE=0)")
    ro.set_defaults(func=roles)
    ts = sub.add_parser("toolset", help="the toolset image (podman): build it, print its tag, or run a tox stage "
                                        "with its tools",
                        description="the toolset image: a Debian root made by debootstrap with the host commands, "
                                    "the locked Python dependencies, the Ansible collections, terraform and this "
                                    "suite, for the cluster-free stages and deploying by hand")
    tsub = ts.add_subparsers(dest="action", required=True)
    tb = tsub.add_parser("build", help="build the image unless its tag exists; print the tag",
                         description="build localhost/refarch-toolset:<version>-<inputs hash> with podman unless "
                                     "it exists; print the tag (the build's log: <cache>/toolset/build.log)")
    tb.add_argument("--force", action="store_true", help="build again even when the tag exists (no layer cache)")
    tb.set_defaults(func=toolset)
    tsub.add_parser("tag", help="print the tag of the current inputs without building",
                    description="print localhost/refarch-toolset:<version>-<inputs hash> without building"
                    ).set_defaults(func=toolset)
    tst = tsub.add_parser("stage", help="run tox.ini's commands of a stage with the tools on PATH (in the image)",
                          description="tox.ini's commands of ENV (lint, policy, unit, gate) run in the checkout "
                                      "with the tools on PATH, without tox: what a job in the toolset image runs")
    tst.add_argument("env", help="a tox environment: lint, policy, unit, gate")
    tst.add_argument("posargs", nargs=argparse.REMAINDER, help="its {posargs}, after --")
    tst.set_defaults(func=toolset)


def aio_command(args) -> int:
    """``refarch aio up|down|list``: one line per all-in-one.

    Raises:
        RefarchError: down without a run id of a running all-in-one.
    """
    from ..clouds import aio
    from ..profile import load_profile

    if args.action == "list":
        for a in aio.running():
            kept = "kept" if a.rundir.read_meta().get("kept") else "owned by a run"
            print(f"{a.run_id}  {a.mode}  {a.address}  {kept}  OS_CLIENT_CONFIG_FILE={a.clouds_yaml}")
        return 0
    if args.action == "down":
        if not args.run_id or args.run_id not in {a.run_id for a in aio.running()}:
            raise RefarchError(f"aio down: {args.run_id or 'a run id'} is no running all-in-one (refarch aio list)")
        removed = aio.stop_run(RunDir.open(args.run_id), RunDir.open(args.run_id).logs / "aio.log")
        print(f"{args.run_id}: removed {removed}")
        return 0
    profile = load_profile(args.profile or ("openstack-aio-guests" if args.mode == "guests" else "openstack-aio"))
    a = aio.start(profile, args.mode)
    a.rundir.update_meta(kept=True)
    print(f"{a.run_id}  {a.mode}  {a.address}  ready in {a.ready_s} s")
    print(f"export OS_CLIENT_CONFIG_FILE={a.clouds_yaml}")
    return 0
