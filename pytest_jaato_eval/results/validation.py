"""`validate STORE...`: every line of a store checked against the record schema, and
several stores against each other (merge.py's rules).
"""
from __future__ import annotations

from pathlib import Path

from .command_io import EXIT_OK, EXIT_PROBLEMS, Unusable, expand, no_record, readable, say
from .cell import plural
from .record import RESULTS_VERSION, ArmRecord
from .store_reader import scan
from ..verdict import BLOCKED, FAIL, PASS, STATES


def record_problems(r: ArmRecord) -> tuple[list[str], list[str]]:
    """(problems, warnings) of one record beyond its types (which `from_dict` reports):
    the version, the states, and whether the arm's state agrees with its verdicts."""
    problems, warnings = [], []
    if r.results_version != RESULTS_VERSION:
        problems.append(f"results_version {r.results_version!r}: this reader knows "
                        f"{RESULTS_VERSION!r}")
    if r.state not in STATES:
        problems.append(f"state {r.state!r}: expected one of {', '.join(STATES)}")
    for i, v in enumerate(r.verdicts):
        if v["state"] not in STATES:
            problems.append(f"verdicts[{i}].state {v['state']!r}: expected one of "
                            f"{', '.join(STATES)}")
        elif v["state"] == BLOCKED and not v.get("blocked_reason"):
            problems.append(f"verdicts[{i}] is BLOCKED without a blocked_reason")
    vstates = [v["state"] for v in r.verdicts]
    if r.state == BLOCKED and not r.blocked_reason and BLOCKED not in vstates:
        # A grader's BLOCKED verdict is a reason: jaato-eval leaves the arm's unset then.
        problems.append("BLOCKED without a reason: no blocked_reason and no BLOCKED verdict")
    if r.state in (PASS, FAIL) and r.blocked_reason:
        problems.append(f"{r.state} with a blocked_reason: the verdicts say otherwise")
    if r.state == PASS and (not vstates or any(s != PASS for s in vstates)):
        problems.append("PASS, but not every grader verdict is PASS")
    if r.state == FAIL and FAIL not in vstates:
        problems.append("FAIL, but no grader verdict is FAIL")
    if r.task_id is not None and r.repeat is not None:
        sample = r.get("sample_id")  # a dataset's row: task[sample]@set#repeat
        expected = f"{r.task_id}{f'[{sample}]' if sample is not None else ''}@{r.set_name}#{r.repeat}"
        if r.arm_id != expected:
            warnings.append(f"arm_id does not match task_id[sample_id]@profile_set#repeat "
                            f"({expected})")
    return problems, warnings


def cmd_validate(args) -> int:
    from .merge import validate_across  # merge.py reads records with record_problems
    paths = expand(args.store)
    results = [_validate_one(path) for path in paths]
    across = validate_across(paths) if len(paths) > 1 else ([], [])
    for warning in [w for _, ws, _ in results for w in ws] + across[1]:
        say(f"warning: {warning}")
    for problem in [p for ps, _, _ in results for p in ps] + across[0]:
        say(f"problem: {problem}")
    for problems, _, summary in results:
        say(summary if problems else f"{summary}: ok")
    failed = any(ps for ps, _, _ in results) or across[0]
    if len(paths) > 1:
        say(f"{len(paths)} stores read as one: {plural(len(across[0]), 'problem')}, "
            f"{plural(len(across[1]), 'warning')} across them" + ("" if failed else ": ok"))
    return EXIT_PROBLEMS if failed else EXIT_OK


def _validate_one(path: Path) -> tuple[list[str], list[str], str]:
    path = readable(path)
    problems: list[str] = []
    warnings: list[str] = []
    where: dict[str, list[tuple[int, str | None]]] = {}
    records = 0
    try:
        for line in scan(path, check=True):
            if line.record is None:
                if line.partial:
                    problems.append(f"{path}:{line.number}: partial last line: a run stopped "
                                    f"mid-write and this arm's record is lost (readers skip it)")
                else:
                    problems.append(f"{path}:{line.number}: {line.problem}")
                continue
            records += 1
            r = line.record
            where.setdefault(r.arm_id, []).append((line.number, r.run_id))
            p, w = record_problems(r)
            problems += [f"{path}:{line.number}: {r.arm_id}: {m}" for m in line.problems + p]
            warnings += [f"{path}:{line.number}: {r.arm_id}: {m}" for m in w]
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not records:
        raise no_record(path)
    for arm, seen in where.items():
        if len(seen) < 2:
            continue
        lines = ", ".join(str(n) for n, _ in seen)
        runs = [run for _, run in seen if run is not None]
        if len(runs) != len(set(runs)):
            problems.append(f"{path}: {arm}: written more than once by one run "
                            f"(lines {lines}): a run writes each arm once")
        else:
            warnings.append(f"{path}: {arm}: appears {len(seen)} times (lines {lines}); "
                            f"the last counts")
    counted = "" if len(where) == records else (
        f" of {plural(len(where), 'arm')} (the last record of an arm is the one counted)")
    summary = (f"{path}: {plural(records, 'record')}{counted}, "
               f"{plural(len(problems), 'problem')}, {plural(len(warnings), 'warning')}")
    return problems, warnings, summary
