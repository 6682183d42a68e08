"""What a grader's process printed, kept bounded: the tail, never the whole.

A grader (or anything it runs) may print 500 MB; the harness keeps the last
TAIL_BYTES in memory as it reads, counts the rest, and turns the tail into at
most EVIDENCE_LINES evidence lines of at most LINE_CHARS characters each, with a
last line that says what was left out. Masking happens on the tail text before
it is cut into lines, so a credential is masked whole, never split by a cut.
"""
from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from typing import IO, Callable

from .. import processes

TAIL_BYTES = 64 * 1024
EVIDENCE_LINES = 20
LINE_CHARS = 400
DRAIN_WAIT = 2.0  # after the grader exits, how long a child holding its output may keep it


class TailReader:
    """Drains a pipe on a thread; keeps its last `limit` bytes and the total count."""

    def __init__(self, stream: IO[bytes], limit: int = TAIL_BYTES):
        self.limit = limit
        self.total = 0
        self.abandoned = False  # a process we could not end still holds the pipe
        self._buf = bytearray()
        self._stream = stream
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            while chunk := self._stream.read1(65536) if hasattr(self._stream, "read1") \
                    else self._stream.read(65536):
                self.total += len(chunk)
                self._buf += chunk
                if len(self._buf) > 2 * self.limit:
                    del self._buf[:-self.limit]
        except (OSError, ValueError):
            pass

    def join(self, timeout: float | None) -> bool:
        """True when the pipe reached its end (every writer closed it)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

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


def run_bounded(args, *, timeout: float | None, **popen) -> Finished:
    """Run a grader's process tree to its end, its stdout and stderr on one pipe (their
    interleaving kept) drained into a bounded tail, so neither a full pipe nor a flood of
    output can stall or swell us. Past `timeout` the tree is killed. Whatever the tree
    left behind (deaf to SIGTERM, setsid()ed away) ends with it. Raises OSError when the
    process cannot start."""
    proc, tree = processes.start(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 **popen)
    out = TailReader(proc.stdout)
    code: int | None = None
    try:
        try:
            code = processes.wait(proc, tree, timeout)
        except subprocess.TimeoutExpired:
            tree.kill()
            proc.wait()
            out.join(DRAIN_WAIT)
        else:
            if not out.join(DRAIN_WAIT):  # a background child still holds the output open
                tree.kill()
                out.join(DRAIN_WAIT)
    finally:
        tree.kill()
        if out.join(0):
            proc.stdout.close()
        else:  # an escaped holder: closing would wait on the reader's lock for as long as
            out.abandoned = True  # it lives; leave the pipe to the reader thread instead
    return Finished(code, out)
