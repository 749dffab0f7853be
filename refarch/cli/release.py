"""The release commands: a run's report, the validation records, the release
gate, the side-by-side comparison and the merge-request note.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import RefarchError
from ..overrides import parse_overrides
from ..paths import runs_dir
from ..run import RunDir


def report(args) -> int:
    from ..report import html as report

    if args.trend:
        print(report.render_trend(runs_dir()))
        return 0
    if not args.run_id:
        raise RefarchError("report: give a RUN_ID or --trend")
    results = RunDir.at(runs_dir() / args.run_id).results_file
    if not results.is_file():
        raise RefarchError(f"report: run {args.run_id} has no results.json (see `refarch list`)")
    print(report.render(results))
    return 0


def record(args) -> int:
    from ..judge import records

    runs = [records.load_results(Path(d)) for d in args.run_dirs]
    record = records.build_record(runs, args.name)
    path = records.write_record(record, Path(args.out))
    print(f"{path}: {record['verdict']} ({len(record['checks'])} checks, {len(record['properties'])} properties, "
          f"runs {', '.join(record['run_ids'])}; descriptors {record['tree_hash'][:12]})")
    for what in record["failed_checks"] + record["failed_properties"]:
        print(f"  failed: {what}")
    return 0


def _environment_problems(version: str, validation: Path) -> list[str]:
    """What the release gate needs of the suite's CI: every environment of
    both tiers passed on this tree's exact key (refarch.ci.release)."""
    from ..ci import environments
    from ..ci import release as ci_release

    return ci_release.problems(version, environments.definitions(), validation)


def gate(args) -> int:
    from ..judge import criteria as release_criteria
    from ..judge import gate

    criteria = release_criteria.load_criteria(Path(args.criteria))
    args.version = args.version.removeprefix("v")
    result = gate.evaluate(args.version, criteria, Path(args.records), environments=_environment_problems,
                           release=not args.merge_request)
    for line in result.warnings:
        print(f"warning: {line}")
    for line in result.problems:
        print(f"REFUSED: {line}")
    if not result.passed:
        print(f"gate: version {args.version} may not be released ({len(result.problems)} problems)")
        return 1
    path = gate.write_gate(result, Path(args.records))
    compared = ", ".join(f"{k} vs {v}" for k, v in result.previous.items()) or "first release: nothing to compare"
    print(f"gate: version {args.version} may be released (descriptors {result.tree_hash[:12]}; {compared}); "
          f"wrote {path}")
    return 0


def compare(args) -> int:
    from . import compare

    baseline = args.baseline
    if not baseline:
        try:
            baseline = compare.previous_tag()
        except RefarchError as exc:
            if not args.first_release_ok:
                raise
            print(f"compare: a first release: nothing to compare with ({exc})")
            return 0
    result = compare.run(baseline, args.candidate, args.repetitions, args.profile, parse_overrides(args.set),
                         Path(args.out) if args.out else None)
    print(f"compare: {result['baseline']} ({result['baseline_version']}) against {result['candidate']} "
          f"({result['candidate_version']}), {result['repetitions']} repetitions each, side by side in "
          f"{result['duration_s']:.0f} s:")
    for fig in result["figures"]:
        print(f"  {fig['message']}")
    print(f"wrote {result['folder']}/compare.json" + (f" and {args.out}" if args.out else ""))
    return 1 if any(f["verdict"] == "regression" for f in result["figures"]) else 0


def mr_note(args) -> int:
    from ..report import mrnote

    print(mrnote.post_summary(Path(args.run_dir)))
    return 0
