"""--jaato-shard's usage errors: each a real pytest run refusing the option in one line.
(The split itself is pure logic, in tests/unit/test_shard.py.)"""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("value, why", [("0/3", "I counts from 1"), ("4/3", "I counts from 1"),
                                        ("x/y", "got 'x/y'"), ("1/0", "N must be at least 1")])
def test_a_bad_shard_is_a_one_line_usage_error(pytester, value, why):
    pytester.makefile(".yaml", task="id: t\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--jaato-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = [line for line in result.stderr.lines if line.strip()]
    assert len(err) == 1, result.stderr.str()
    assert err[0].startswith("ERROR: --jaato-shard: expected I/N") and why in err[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_last_failed_is_refused_with_a_shard(pytester):
    """--lf collects only the files of this machine's failures: a split over that would
    differ from every other machine's."""
    result = pytester.runpytest_subprocess("--jaato-shard=1/2", "--lf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --jaato-shard does not combine with --lf: *"])
