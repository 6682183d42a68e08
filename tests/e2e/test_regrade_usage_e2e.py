"""--jaato-regrade, --jaato-no-grade and the snapshot cap's usage errors: each a real pytest
run refusing the option in one line, before any arm (docs/regrading.md)."""
from __future__ import annotations

import pytest

CASES = {
    "no such store": (["--jaato-regrade=missing.jsonl"],
                      "ERROR: --jaato-regrade */missing.jsonl: no such store*"),
    "the store it grades": (["--jaato-regrade=old.jsonl", "--jaato-out=old.jsonl"],
                            "ERROR: --jaato-out */old.jsonl: is the store --jaato-regrade "
                            "grades again; * (old.regraded.jsonl)"),
    "with --resume": (["--jaato-regrade=old.jsonl", "--resume"],
                      "ERROR: --jaato-regrade does not combine with --resume*"),
    "grading later, keeping nothing": (["--jaato-no-grade", "--no-jaato-snapshots"],
                                       "ERROR: --jaato-no-grade with --no-jaato-snapshots*"),
    "a cap that is no number": (["-o", "jaato_snapshot_max_mb=lots"],
                                "ERROR: ini jaato_snapshot_max_mb: expected a number of MB "
                                ">= 0 (0 keeps none), got 'lots'"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_regrade_option_is_a_one_line_usage_error(pytester, case):
    args, line = CASES[case]
    pytester.makefile(".jsonl", old='{"arm_id": "t@echo#0"}\n')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    err = [x for x in result.stderr.lines if x.strip()]
    assert len(err) == 1, result.stderr.str()
    result.stderr.fnmatch_lines([line])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
