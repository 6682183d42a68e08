"""The config-root paths a shell command spells out as `$JAATO_EVAL_CONFIG_ROOT/<path>`: a
script grader's own files (task/grader_files.py), and the files a driver's command needs in
the agent's copy (task/session_files.py). What a command reads without spelling it so is
not found here, and nothing that decides what the agent may read rests on it alone."""
from __future__ import annotations

import os
import re
import shlex

# `$JAATO_EVAL_CONFIG_ROOT/a/b` or `${JAATO_EVAL_CONFIG_ROOT}/a/b` in a command, up to the
# first character a shell would end the word at.
_NAMED = re.compile(r"\$\{?JAATO_EVAL_CONFIG_ROOT\}?/([^\s\"'`;|&<>()$\\]+)")


# Absolute paths of the system's own, never a task's file.
SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib", "/etc/", "/dev/", "/proc/", "/opt/")


def words(command: str) -> list[str]:
    """A shell command's words, as the shell would split them (on whitespace when it
    cannot be parsed)."""
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def absolute_in(command: str) -> list[str]:
    """The absolute paths outside the system's own that a command spells out as words."""
    return [w for w in words(command) if os.path.isabs(w) and not w.startswith(SYSTEM_PREFIXES)]


def named_in(command: str) -> set[str]:
    """The config-root paths a shell command spells out, relative and normalised; never one
    that leaves the root."""
    out = set()
    for found in _NAMED.findall(command):
        rel = os.path.normpath(found.rstrip("/"))
        if rel not in (".", "") and not rel.startswith(".."):
            out.add(rel)
    return out
