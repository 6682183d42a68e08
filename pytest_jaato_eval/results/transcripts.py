"""An arm's transcript: what its agent was told, said and did, turn by turn, and what its
judge did, kept beside the store (docs/reports.md, "Transcripts").

One gzip-compressed JSON file per arm, in the folder `<store stem>.transcripts/` beside
the store (`results.jsonl` -> `results.transcripts/`); the record's `transcript` field
names the file. The file holds every session of the arm: for a session arm its one
session, for a driver arm each session the driver opened, then each session a grader
opened (a judge's). A session is its messages (the text, each tool call with its
arguments, each tool result), its turns (tokens and seconds per turn, as the daemon
counted them), model, usage and completion payload.

Bounded: a text part, a tool call's arguments and a tool result are each cut to a fixed
length, a session keeps its first and last messages when it has too many, and the whole
file stays under MAX_JSON_BYTES before compression; every cut is said in the file
(`cuts`) and where it was made. Masked with the run's Redactor like the record.

Where the history comes from is said too: a session arm's and a judge's come from the
daemon's answer to the history request; a driver's sessions are read from the daemon's
session files in the workspace, which the agent could have rewritten (`source`).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from ..engine.agent_run import AgentRun

FORMAT = "pytest-jaato-eval transcript 1"
SUFFIX = ".json.gz"
TEXT_CHARS = 20_000      # one text part of a message
VALUE_CHARS = 8_000      # a tool call's arguments, a tool's result, a payload (as JSON)
MESSAGES = 400           # per session: past this, the first HEAD and the last rest are kept
HEAD = 50
MAX_JSON_BYTES = 2 * 1024 * 1024  # the whole transcript, before compression
MAX_FILE_BYTES = MAX_JSON_BYTES   # what a reader reads of a file (compressed)
FROM_DAEMON = "the daemon's answer to the history request"
FROM_FILE = "the daemon's session file in the workspace (the agent could have rewritten it)"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@#+=-]{0,160}\.json\.gz$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._@#+=-]+")


# -- where ------------------------------------------------------------------------------------
def folder_of(store: Path | str) -> Path:
    """The transcripts folder of a store: `results.jsonl` -> `results.transcripts/`."""
    store = Path(store)
    return store.with_name(f"{store.stem}.transcripts")


def file_name(arm_id: str, run_id: str | None) -> str:
    """A file name for an arm's transcript in a run: readable, unique per (run, arm), and
    never a path (an arm id is shown in the name only as far as it is safe)."""
    slug = _UNSAFE.sub("_", arm_id).strip("._")[:100] or "arm"
    digest = hashlib.sha256(f"{run_id}\0{arm_id}".encode()).hexdigest()[:16]
    return f"{slug}.{digest}{SUFFIX}"


def valid_name(name: Any) -> bool:
    """A record's `transcript` is a file name in the folder, nothing else (a store anybody
    may have written must not make a reader open another path)."""
    return type(name) is str and bool(_NAME.match(name)) and ".." not in name


# -- building ---------------------------------------------------------------------------------
class _Cuts:
    def __init__(self) -> None:
        self.said: list[str] = []

    def text(self, value: Any, limit: int, where: str) -> Any:
        if type(value) is not str or len(value) <= limit:
            return value
        self.said.append(f"{where}: {len(value):,} characters cut to {limit:,}")
        return value[:limit] + f" … [{len(value) - limit:,} characters cut]"

    def value(self, value: Any, limit: int, where: str) -> Any:
        """A JSON value, kept as it is when its text is short, else its text cut."""
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (ValueError, RecursionError):
            text = repr(value)
        if len(text) <= limit:
            return value
        return {"cut": self.text(text, limit, where)}


def _message(message: Any, where: str, cuts: _Cuts) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {"role": "?", "parts": [{"type": "text",
                                        "text": cuts.text(str(message), TEXT_CHARS, where)}]}
    out = {k: message[k] for k in ("role", "model", "provider") if k in message}
    parts = []
    for i, part in enumerate(message.get("parts") or []):
        here = f"{where}, part {i + 1}"
        if not isinstance(part, dict):
            parts.append({"type": "text", "text": cuts.text(str(part), TEXT_CHARS, here)})
            continue
        kind = part.get("type")
        p: dict[str, Any] = {"type": kind}
        if kind == "function_call":
            p.update(name=part.get("name"), id=part.get("id") or part.get("call_id"),
                     args=cuts.value(part.get("args"), VALUE_CHARS, f"{here} (arguments)"))
        elif kind == "function_response":
            p.update(name=part.get("name"), call_id=part.get("call_id"),
                     is_error=part.get("is_error"),
                     result=cuts.value(  # `response` on the wire, `result` in a session file
                         part["result"] if "result" in part else part.get("response"),
                         VALUE_CHARS, f"{here} (result)"))
        else:
            for key in ("text", "thought"):
                if key in part:
                    p[key] = cuts.text(part[key] if type(part[key]) is str else str(part[key]),
                                       TEXT_CHARS, here)
            if len(p) == 1:  # a part of a kind we do not know: kept, bounded
                p["value"] = cuts.value(part, VALUE_CHARS, here)
        parts.append(p)
    out["parts"] = parts
    return out


def _messages(history: list | None, where: str, cuts: _Cuts) -> list[dict] | None:
    if history is None:
        return None
    kept = list(history)
    dropped = 0
    if len(kept) > MESSAGES:
        dropped = len(kept) - MESSAGES
        kept = kept[:HEAD] + kept[HEAD + dropped:]
        cuts.said.append(f"{where}: {dropped:,} messages of {len(history):,} cut after the "
                         f"first {HEAD}")
    out = []
    for i, m in enumerate(kept):
        if dropped and i == HEAD:
            out.append({"role": "cut", "parts": [{"type": "text", "text":
                        f"[{dropped:,} messages cut]"}]})
        n = i + 1 if not dropped or i < HEAD else i + 1 + dropped
        out.append(_message(m, f"{where}, message {n}", cuts))
    return out


def _turns(accounting: list | None, where: str, cuts: _Cuts) -> list | None:
    if accounting is None:
        return None
    turns = [t for t in accounting if isinstance(t, dict)][:MESSAGES]
    return [cuts.value(t, VALUE_CHARS, f"{where}, turn {i + 1}") for i, t in enumerate(turns)]


def session(role: str, run: AgentRun, *, grader_id: str | None = None,
            session_id: str | None = None, history: list | None = None,
            accounting: list | None = None, source: str = FROM_DAEMON,
            cuts: _Cuts) -> dict[str, Any]:
    """One session of the arm: who ran it, its messages and turns, what it ended with."""
    sid = session_id or run.session_id
    where = f"{role} session {sid or '?'}"
    return {
        "role": role, "grader_id": grader_id, "session_id": sid, "source": source,
        "model": run.model, "provider": run.provider,
        "messages": _messages(history, where, cuts),
        "turns": _turns(accounting, where, cuts),
        "usage": dict(run.usage), "duration_seconds": run.duration_seconds,
        "termination_reason": run.termination_reason, "error": run.error,
        "blocked_reason": run.blocked_reason,
        "payload": cuts.value(run.payload, VALUE_CHARS,
                              f"{where} (completion payload)"),
    }


def build(*, arm_id: str, task_id: str, run_id: str | None, run: AgentRun, driver: bool,
          grader_runs: Iterable[tuple[str, AgentRun]] = (), session_files: Any = None
          ) -> dict[str, Any]:
    """The transcript of an arm that just ended. `session_files(sid)` reads a driver
    session's file from the workspace (a mapping, or None)."""
    cuts = _Cuts()
    sessions = []
    if driver:
        for sid in run.session_ids:
            saved = session_files(sid) if session_files is not None else None
            saved = saved if isinstance(saved, dict) else {}
            history = saved.get("history") if isinstance(saved.get("history"), list) else None
            turns = saved.get("turn_accounting")
            one = session("driver", run, session_id=sid, history=history,
                          accounting=turns if isinstance(turns, list) else None,
                          source=FROM_FILE, cuts=cuts)
            # What this session spent and how it ended, as its file says: the run's own
            # figures are the whole arm's.
            spent = b if isinstance(b := saved.get("budget_usage"), dict) else {}
            one.update(usage={"cost_usd": spent.get("usd"),
                              "spend_total_tokens": spent.get("tokens")},
                       duration_seconds=None, termination_reason=saved.get("end_reason"),
                       error=None, blocked_reason=None, payload=None)
            sessions.append(one)
    elif run.session_id:
        sessions.append(session("agent", run, history=run.history,
                                accounting=run.turn_accounting, cuts=cuts))
    for grader_id, grader_run in grader_runs:
        sessions.append(session("judge", grader_run, grader_id=grader_id,
                                history=grader_run.history,
                                accounting=grader_run.turn_accounting,
                                cuts=cuts))
    transcript = {"format": FORMAT, "arm_id": arm_id, "task_id": task_id, "run_id": run_id,
                  "sessions": sessions, "cuts": cuts.said}
    return _within_bound(transcript)


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))


def _within_bound(transcript: dict[str, Any]) -> dict[str, Any]:
    """The whole file under MAX_JSON_BYTES: messages from the middle of the longest session
    go first, each removal said. Each message is measured once."""
    total = _size(transcript)
    if total <= MAX_JSON_BYTES:
        return transcript
    for s in sorted((s for s in transcript["sessions"] if s["messages"]),
                    key=lambda s: -_size(s["messages"])):
        messages = s["messages"]
        sizes = [_size(m) + 1 for m in messages]
        lo = hi = len(messages) // 2  # messages[lo:hi] go: a window widening both ways
        while total > MAX_JSON_BYTES and (lo > 1 or hi < len(messages) - 1):
            if hi < len(messages) - 1 and (hi - len(messages) // 2 <= len(messages) // 2 - lo
                                           or lo <= 1):
                total, hi = total - sizes[hi], hi + 1
            else:
                total, lo = total - sizes[lo - 1], lo - 1
        gone = hi - lo
        if gone:
            s["messages"] = messages[:lo] + [
                {"role": "cut", "parts": [{"type": "text", "text": f"[{gone:,} messages cut]"}]}
            ] + messages[hi:]
            transcript["cuts"].append(f"{s['role']} session {s['session_id']}: {gone:,} "
                                      f"messages cut from the middle (the transcript was over "
                                      f"{MAX_JSON_BYTES:,} bytes)")
        if total <= MAX_JSON_BYTES:
            return transcript
    if _size(transcript) > MAX_JSON_BYTES:  # what is left is too large still: messages go
        transcript["sessions"] = [dict(s, messages=None, turns=None)
                                  for s in transcript["sessions"]]
        transcript["cuts"].append(f"every message cut: the transcript was larger than "
                                  f"{MAX_JSON_BYTES:,} bytes")
    return transcript


def encode(transcript: dict[str, Any]) -> bytes:
    text = json.dumps(transcript, ensure_ascii=False, default=str, separators=(",", ":"))
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)


# -- the folder -------------------------------------------------------------------------------
def own_folder(store: Path | str, folder=folder_of, what: str = "transcript") -> Path:
    """The store's folder of `what`, made: ours to make, so a link there is somebody's plant
    and nothing is written through it (ValueError)."""
    folder = folder(store)
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink():
        raise ValueError(f"{folder}: is a link; no {what} is written through it")
    return folder


def write(store: Path | str, name: str, data: bytes) -> Path:
    """Write one arm's transcript beside the store; whole or not at all."""
    if not valid_name(name):
        raise ValueError(f"not a transcript file name: {name!r}")
    folder = own_folder(store, folder_of, "transcript")
    path = folder / name
    fd, partial = _partial(folder, name)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(partial, path)  # a rename replaces whatever is at the path, never follows it
    return path


def _partial(folder: Path, name: str) -> tuple[int, str]:
    """A new file of ours in `folder` to write `name` into before it is renamed over it:
    made exclusively under a name nobody could have guessed, so no link or FIFO planted
    there is ever opened."""
    fd, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
    os.fchmod(fd, 0o644)  # as any other file of the store's
    return fd, partial


def follow(store: Path, moved_to: Path, folder=folder_of) -> None:
    """The store was set aside as `moved_to`: its transcripts go with it (an older copy
    under that name, replaced by the store, takes its transcripts along). `folder`: the
    store's folder of another kind (its snapshots)."""
    src, dst = folder(store), folder(moved_to)
    try:  # never the store's failure: at worst the new run's files join the old ones
        if dst.is_symlink() or dst.is_file():
            dst.unlink()
        elif dst.exists():
            shutil.rmtree(dst, ignore_errors=True)
        if src.is_dir() and not src.is_symlink():
            os.replace(src, dst)
    except OSError:
        pass


def copy(from_store: Path, to_store: Path, name: Any) -> bool:
    """Copy one transcript from one store's folder to another's (merge); False when the
    input has none by that name."""
    if not valid_name(name):
        return False
    src = folder_of(from_store) / name
    if not src.is_file():
        return False
    dst = folder_of(to_store)
    dst.mkdir(parents=True, exist_ok=True)
    fd, partial = _partial(dst, name)
    with open(src, "rb") as given, os.fdopen(fd, "wb") as fh:
        shutil.copyfileobj(given, fh)
    os.replace(partial, dst / name)
    return True


class TranscriptUnreadable(Exception):
    """The one line a reader shows instead of the transcript."""


def read(store: Path | str, name: Any) -> dict[str, Any]:
    """An arm's transcript from the store's folder, bounded; raises TranscriptUnreadable."""
    if name is None:
        raise TranscriptUnreadable("no transcript was kept for this arm")
    if not valid_name(name):
        raise TranscriptUnreadable(f"the record's transcript {str(name)[:80]!r} is not a "
                                   f"file name; not read")
    path = folder_of(store) / name
    try:  # never through a link, never waiting on a FIFO somebody left in its place
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise TranscriptUnreadable(f"{path}: not a regular file; not read")
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise TranscriptUnreadable(f"{path}: {exc.strerror or exc}") from None
    return decode(raw, str(path))


def decode(raw: bytes, where: str = "transcript") -> dict[str, Any]:
    """A compressed transcript's content, bounded; raises TranscriptUnreadable."""
    if len(raw) > MAX_FILE_BYTES:
        raise TranscriptUnreadable(f"{where}: larger than {MAX_FILE_BYTES:,} bytes; not read")
    try:  # a bounded inflate: a small file that unpacks to gigabytes is refused
        inflate = zlib.decompressobj(wbits=31)
        text = inflate.decompress(raw, 4 * MAX_JSON_BYTES)
        if inflate.unconsumed_tail:
            raise TranscriptUnreadable(f"{where}: unpacks to more than "
                                       f"{4 * MAX_JSON_BYTES:,} bytes; not read")
        data = json.loads(text)
    except (zlib.error, ValueError, RecursionError) as exc:
        raise TranscriptUnreadable(f"{where}: not a transcript ({type(exc).__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("sessions"), list):
        raise TranscriptUnreadable(f"{where}: not a transcript (no sessions)")
    return data
