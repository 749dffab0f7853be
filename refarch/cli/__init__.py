"""Command line: the stages of a run, each on its own (as Terratest's
skippable stages and Molecule's steps), plus the sweep.

  refarch up --profile local [--set K=V]   deploy + configure, keep; prints the run id
  refarch configure RUN_ID                 run the playbook against a kept cluster
  refarch inventory RUN_ID                 write its Ansible inventory, print the path
  refarch test RUN_ID [-- PYTEST ARGS]     node/cluster checks and smoke job against it
  refarch destroy RUN_ID                   terraform destroy + sweep + leak check
  refarch sweep [--stale] [--dry-run]      remove leftovers of runs (by label)
  refarch list                             runs and their state
  refarch janitor --cloud NAME [--prefix hvd-] [--older-than 6h] [--delete]
                                           OpenStack: run-scoped resources older than
                                           the age, in deletion order (dry run by default)
  refarch record RUN_DIR... [--name NAME]  validation record of the runs' profile
  refarch gate VERSION                     may VERSION be released (release criteria + records)
  refarch mr-note RUN_DIR                  post the run's summary on the merge request
  refarch roles [-s NAME]                  Molecule scenario of every role (or NAME)
  refarch toolset build [--force] | tag    the toolset image (podman): every tool of the
                                           cluster-free stages; prints its tag
  refarch toolset stage ENV [-- ARGS]      tox.ini's commands of ENV with the tools on PATH
  refarch ci plan | list | run | gitlab | record VERSION
                                           the suite's CI: its two tiers (python -m refarch.ci)

The default full job (deploy, configure, check, smoke, destroy) is
``pytest tests/integration --profile local`` (``tox -e integration``).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import RefarchError
from . import builds, release, runs


def build_parser() -> argparse.ArgumentParser:
    """The ``refarch`` parser: each command module adds its own commands
    (``add_parsers``), as Molecule keeps one module per command."""

    p = argparse.ArgumentParser(prog="refarch", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for module in (runs, builds, release):
        module.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ci"]:  # the suite's CI has its own command line
        from ..ci.__main__ import main as ci_main

        return ci_main(argv[1:])
    if argv[:1] == ["check-args"]:  # the job's own options follow: not argparse's
        return runs.check_args(argparse.Namespace(job_args=argv[1:]))
    args = build_parser().parse_args(argv)
    if getattr(args, "pytest_args", None) and args.pytest_args[0] == "--":
        args.pytest_args = args.pytest_args[1:]
    try:
        return args.func(args)
    except RefarchError as exc:
        print(f"refarch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"refarch: interrupted ({exc or 'SIGINT'})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
