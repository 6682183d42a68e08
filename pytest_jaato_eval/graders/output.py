"""What a grader's process printed, kept bounded: the tail, never the whole.

A grader (or anything it runs) may print 500 MB; the harness keeps the last
TAIL_BYTES in memory as it reads, counts the rest, and turns the tail into at
most EVIDENCE_LINES evidence lines of at most LINE_CHARS characters each, with a
last line that says what was left out. Masking happens on the tail text before
it is cut into lines, so a credential is masked whole, never split by a cut.
"""
from __future__ import annotations

import math
import os
import select
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable

from .. import processes

TAIL_BYTES = 64 * 1024
EVIDENCE_LINES = 20
LINE_CHARS = 400
PUMP_CHUNKS = 16  # 1 MB per read burst
DRAIN_WAIT = 2.0  # after the grader exits, how long a child holding its output may keep it


class TailReader:
    """A pipe's last `limit` bytes and its total count, read without blocking by whoever
    waits on the process (processes.wait), in that thread: no thread of its own."""

    def __init__(self, stream: IO[bytes], limit: int = TAIL_BYTES):
        self.limit = limit
        self.total = 0
        self.eof = False
        self.abandoned = False  # a process we could not end still held the pipe
        self._buf = bytearray()
        self._stream = stream
        self._fd = stream.fileno()
        os.set_blocking(self._fd, False)

    def fileno(self) -> int:
        return self._fd

    def pump(self) -> None:
        """Read what the pipe holds now; bounded per call, so a flood still lets the
        caller look at the clock and the child's exit."""
        for _ in range(PUMP_CHUNKS):
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
                return
            self.total += len(chunk)
            self._buf += chunk
            if len(self._buf) > 2 * self.limit:
                del self._buf[:-self.limit]

    def drain(self, timeout: float) -> bool:
        """Read to the pipe's end, waiting at most `timeout` seconds: True when it ended
        (every writer closed it)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            watch = select.poll()
            watch.register(self._fd, select.POLLIN)
            if watch.poll(math.ceil(left * 1000)):
                self.pump()
        return True

    def close(self) -> None:
        """Stop reading; a writer still holding the pipe gets EPIPE from now on."""
        if not self.eof:
            self.abandoned = True
        self._stream.close()

    def tail(self) -> bytes:
        data = bytes(self._buf[-self.limit:])
        if self.abandoned:
            data += (b"\n[the output was still held open by a process that left the grader's "
                     b"tree; it was not read further]")
        return data


def evidence(tail: bytes, total: int, mask: Callable[[str], str] | None = None,
             lines: int = EVIDENCE_LINES, line_chars: int = LINE_CHARS) -> list[str]:
    """The last `lines` lines of output, masked, each cut at `line_chars`, plus a note
    saying how much was left out when anything was."""
    text = tail.decode(errors="replace")
    partial_head = total > len(tail)
    if partial_head:  # the first line of a cut window is a fragment: drop it
        text = text.split("\n", 1)[1] if "\n" in text else ""
    if mask is not None:
        text = mask(text)
    all_lines = text.splitlines()
    kept = all_lines[-lines:]
    cut = [line if len(line) <= line_chars else line[:line_chars] + " …" for line in kept]
    if partial_head or len(all_lines) > lines or any(len(x) > line_chars for x in kept):
        cut.append(f"[output: {total} bytes; evidence is its last {lines} lines, each cut at "
                   f"{line_chars} characters]")
    return cut


@dataclass
class Finished:
    code: int | None  # None: it ran past its timeout and its tree was killed
    out: TailReader
    running: list[processes.Running] = field(default_factory=list)  # its tree at the timeout


def run_bounded(args, *, timeout: float | None, **popen) -> Finished:
    """Run a grader's process tree to its end, its stdout and stderr on one pipe (their
    interleaving kept) drained into a bounded tail, so neither a full pipe nor a flood of
    output can stall or swell us. Past `timeout` the tree is killed. Whatever the tree
    left behind (deaf to SIGTERM, setsid()ed away) ends with it. Raises OSError when the
    process cannot start."""
    proc, tree = processes.start(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 **popen)
    assert proc.stdout is not None  # a pipe, asked for above
    out = TailReader(proc.stdout)
    code: int | None = None
    running: list[processes.Running] = []
    try:
        try:
            code = processes.wait(proc, tree, timeout, reading=out)
        except subprocess.TimeoutExpired:
            running = tree.running()  # what it ran when time was up: whose program hung
            tree.kill()
            proc.wait()
            out.drain(DRAIN_WAIT)
        else:
            if not out.drain(DRAIN_WAIT):  # a background child still holds the output open
                tree.kill()
                out.drain(DRAIN_WAIT)
    finally:
        tree.kill()
        out.close()
    return Finished(code, out, running)


def program_of(running: list[processes.Running], workspace: Path) -> str | None:
    """The first process among `running` whose program, or first argument that is not an
    option (the script an interpreter runs), is a file of `workspace`: the agent wrote or
    can change it. Named as the process named it; None when none is."""
    ws = os.path.realpath(workspace)
    for proc in running:
        named = [proc.exe, *proc.argv[:1]]
        named += [a for a in proc.argv[1:] if not a.startswith("-")][:1]
        for name in named:
            if not name:
                continue
            real = os.path.realpath(os.path.join(proc.cwd, name))
            if real.startswith(ws + os.sep) and os.path.isfile(real):
                return name
    return None
