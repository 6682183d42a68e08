"""The arm record: the one type every part of the plugin reads and writes (R2).

`ArmRecord.to_dict()` is the store's line, every key present, nulls included, so
jaato-eval 0.3.4's `report` reads our stores; `ArmRecord.from_dict()` is the one
reader, for our stores and the reference's. A store is a file anybody may have
written, so `from_dict` is also where a value of the wrong type is decided, once:
it becomes "unknown" (None, or an empty list/mapping) and, when the caller asks,
a problem line says so. Readers downstream never re-check types.

Adding a field is one line in the class body: its annotation says what
`from_dict` accepts. Keys nobody declared are kept in `extra`, in their order,
and written back unchanged.
"""
from __future__ import annotations

import functools
import importlib.metadata
import json
import math
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable

from ..engine.accounting import payload_hash
from ..number import is_number
from ..verdict import BLOCKED, FAIL, PASS, STATES, blocked_grader, instrument_caveats

RESULTS_VERSION = "1"
DEFAULT_SET = "default"  # the set name of an arm run under no named set (jaato-eval's too)

Json = Any  # any JSON value, cleaned of numbers no reader can format (clean)


# -- values: what from_dict keeps of each --------------------------------------------------------
# A JSON number we show and sum: finite, and an int small enough to be a float exactly.
INT_LIMIT = 2 ** 53


def shown_type(value: Any) -> str:
    if is_number(value):
        return "a number out of range" if type(value) is int else "a non-finite number"
    return type(value).__name__


def number(value: Any) -> float | None:
    """A JSON number every reader can show and sum (never a bool), or None: the rule
    `from_dict` applies to every number it keeps, and the one every reader uses."""
    t = type(value)
    if t is int:
        return value if -INT_LIMIT <= value <= INT_LIMIT else None
    if t is float:
        return value if math.isfinite(value) else None
    return None


MAX_DEPTH = 64  # deeper than any record we write: a store built to overflow the stack is cut


def _fine(value: Any, depth: int = 0) -> bool:
    """True when no number in `value` needs cleaning and it is not nested deeper than
    MAX_DEPTH (the common case, checked cheaply)."""
    if depth > MAX_DEPTH:
        return False
    t = type(value)
    if t is dict:
        value = value.values()
    elif t is not list:
        return t is not int and t is not float or number(value) is not None
    for v in value:
        t = type(v)
        if t is str or v is None or t is bool:
            continue
        if t is int:
            if not -INT_LIMIT <= v <= INT_LIMIT:
                return False
        elif t is float:
            if not math.isfinite(v):
                return False
        elif not _fine(v, depth + 1):
            return False
    return True


def clean(value: Any, where: str, problems: list[str] | None, depth: int = 0) -> Any:
    """A JSON value with every number no reader could show (Infinity, NaN, an int of
    400 digits) replaced by None, and anything nested deeper than MAX_DEPTH cut to None.
    Small structures only: ceilings, pools, provenance."""
    if depth <= MAX_DEPTH and _fine(value, depth):
        return value
    if depth > MAX_DEPTH:
        if problems is not None:
            problems.append(f"{where}: nested deeper than {MAX_DEPTH} levels; cut")
        return None
    t = type(value)
    if t is dict:
        return {k: clean(v, f"{where}.{k}" if where else k, problems, depth + 1)
                for k, v in value.items()}
    if t is list:
        return [clean(v, f"{where}[{i}]", problems, depth + 1) for i, v in enumerate(value)]
    if problems is not None:
        problems.append(f"{where}: expected a finite number, got {shown_type(value)}")
    return None


# -- the checks, derived from the annotations ---------------------------------------------------
VERDICT_TEXT_KEYS = ("grader_id", "claim", "state", "detail")


def _verdict(value: Any) -> dict | None:
    """One grader verdict with the types readers rely on; None when not a mapping."""
    if type(value) is not dict:
        return None
    v = dict(value)
    for key in VERDICT_TEXT_KEYS:
        if type(v.get(key)) is not str:
            v[key] = "" if v.get(key) is None else str(v.get(key))
    reason = v.get("blocked_reason")
    if reason is not None and type(reason) is not str:
        v["blocked_reason"] = str(reason)
    ev = v.get("evidence")
    if type(ev) is not list:
        v["evidence"] = [] if ev is None or ev == "" else [str(ev)]
    elif any(type(x) is not str for x in ev):
        v["evidence"] = [str(x) for x in ev]
    return v


def checker(hint: Any, default: Any):
    """(check, what it expects in words) for one annotation. check(v) -> (value, bad):
    the value to keep, and whether `v` was not what the annotation allows."""
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args and optional else hint
    origin = typing.get_origin(base) or base
    if hint is Any:
        return (lambda v, p, k: (clean(v, k, p), False)), "any JSON value"
    if origin in (str, int, float):
        ok = {str: lambda v: type(v) is str,
              int: lambda v: type(v) is int and number(v) is not None,
              float: lambda v: number(v) is not None}[origin]
        what = {str: "a string", int: "an integer", float: "a number"}[origin]

        def check(v, p, k):
            if v is None:
                return (None, False) if optional else (default(), True)
            return (v, False) if ok(v) else (default(), True)
    elif origin is dict:
        what = "a mapping"

        def check(v, p, k):
            if type(v) is dict:
                return clean(v, k, p), False
            if v is None:  # a null mapping is an unknown one
                return (None if optional else default()), False
            return default(), True
    elif origin is list:
        (item,) = typing.get_args(base) or (Any,)
        what = "a list"
        if item is str:
            def check(v, p, k):
                if type(v) is list:
                    if all(type(x) is str for x in v):
                        return v, False
                    return [str(x) for x in v], True
                return default(), v is not None
        else:  # the verdicts: mappings, each with the types readers rely on
            def check(v, p, k):
                if type(v) is not list:
                    return default(), v is not None
                out = [x for x in map(_verdict, v) if x is not None]
                return out, len(out) != len(v)
    else:  # a field whose type this table does not know: found at import, not in a store
        raise TypeError(f"ArmRecord: no reading of {hint!r}; add one to checker()")
    return check, what + (" or null" if optional else "")


class RecordError(ValueError):
    """A JSON value that is not an arm record at all (no string `arm_id`)."""


@dataclass(frozen=True, slots=True, eq=True)
class ArmRecord:
    # -- R2: the reference's keys, in its order ------------------------------------------
    results_version: str | None = RESULTS_VERSION
    # The limits of the instruments that graded the arm (a judge is a model scoring a model),
    # as jaato-eval and jaato-server's results reader mean the field; the engine's own
    # remarks on the run are `notes`.
    caveats: list[str] = field(default_factory=list)
    arm_id: str = ""
    task_id: str | None = None
    profile_set: str | None = None
    repeat: int | None = None
    state: str | None = None
    blocked_reason: str | None = None
    verdicts: list[dict] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    duration_seconds: float | None = None
    turns: int | None = None
    finish_reason: str | None = None
    payload_hash: str | None = None
    error: str | None = None
    session_id: str | None = None
    session_ids: list[str] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    upstream_provider: str | None = None
    native_finish_reason: str | None = None
    completion_nudges: int | None = None
    budget_ceiling: Json = None
    pool_limits: Json = None
    pool_on_arrival: Json = None
    provenance: dict | None = None
    # -- ours ---------------------------------------------------------------------------
    # What the engine noticed about the run (history absent, a retried session.new, a
    # contamination caveat, ...): shown beside the verdict, never a grader's limit.
    notes: list[str] = field(default_factory=list)
    run_id: str | None = None
    task_hash: str | None = None
    termination_reason: str | None = None
    workspace: str | None = None
    finished_at: float | None = None
    # What the arm's graders spent on sessions of their own (a judge): the usage keys,
    # summed; null when no grader opened one. Never in `usage`, which is the agent's.
    judge_usage: dict | None = None
    # The arm's transcript: its file, relative to the store's folder (results/transcripts.py).
    transcript: str | None = None
    # What the arm's graders graded: the workspace as the agent left it and the run's facts,
    # a file in `<store>.snapshots/` (results/snapshots.py); null with `snapshot_note`
    # saying why none was kept (over its cap, a special file, snapshots off).
    snapshot: str | None = None
    snapshot_note: str | None = None
    # What the agent saw and what grades it, each part hashed apart (task/sides.py): a
    # regrade is refused when the agent's side changed, and is what a grader change is.
    agent_side: dict | None = None
    grader_side: dict | None = None
    # A record of a regrade (--jaato-regrade): the run and record it graded again; its
    # `usage` is that run's agent's, its `judge_usage` the regrade's own judge spend.
    regraded: dict | None = None
    # What confined the agent (engine/sandbox.py): "bwrap", or "none" where nothing did.
    sandbox: str | None = None
    # The whole arm as pytest timed it, setup (preflight, workspace, the daemon's start)
    # and call (the agent, the graders); `duration_seconds` is the agent's session alone.
    arm_seconds: float | None = None
    # Of `arm_seconds`, the wait for the private daemon's start: the first arm that needed it.
    daemon_wait_seconds: float | None = None
    # Keys this version does not declare, as read: a newer writer's fields survive a merge.
    extra: dict = field(default_factory=dict)

    # -- the store's line -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _FIELD_NAMES}
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None) -> "ArmRecord":
        """The record a JSON object holds. Raises RecordError when it is not one (no
        string arm_id); any other wrong value becomes unknown, with a line appended to
        `problems` when given."""
        if not isinstance(data, dict) or type(data.get("arm_id")) is not str:
            raise RecordError("not a result record (no string arm_id)")
        values = {}
        extra = {}
        for key, value in data.items():
            check = _CHECKS.get(key)
            if check is None:
                extra[key] = value if problems is None else clean(value, key, problems)
                continue
            kept, bad = check(value, problems, key)
            if bad and problems is not None:
                got = ("a list holding other values" if type(value) is list
                       and _WHAT[key].startswith("a list") else shown_type(value))
                problems.append(f"{key}: expected {_WHAT[key]}, got {got}")
            values[key] = kept
        if problems is not None:
            missing = [k for k in REFERENCE_KEYS if k not in data]
            if missing:
                problems.append(f"missing keys: {', '.join(missing)} (every key is written, "
                                f"nulls included)")
        return cls(**values, extra=extra)

    # -- derived values every reader shares -------------------------------------------------
    @property
    def set_name(self) -> str:
        return self.profile_set or DEFAULT_SET

    @property
    def cost(self) -> float | None:
        return number(self.usage.get("cost_usd"))

    @property
    def tokens(self) -> float | None:
        return number(self.usage.get("spend_total_tokens"))

    @property
    def judge_cost(self) -> float | None:
        return number((self.judge_usage or {}).get("cost_usd"))

    @property
    def blocked_why(self) -> str | None:
        """Why the arm is BLOCKED: its own blocked_reason, else its first blocked grader's."""
        return self.blocked_reason or blocked_grader(self.verdicts)


# -- what from_dict accepts, field by field (checker) -----------------------------------------
_HINTS = typing.get_type_hints(ArmRecord)
_FIELD_NAMES = tuple(f.name for f in fields(ArmRecord) if f.name != "extra")
_CHECKS: dict[str, Any] = {}
_WHAT: dict[str, str] = {}
for _f in fields(ArmRecord):
    if _f.name != "extra":
        _default = (_f.default_factory if _f.default_factory is not MISSING
                    else (lambda d=_f.default: d))
        _CHECKS[_f.name], _WHAT[_f.name] = checker(_HINTS[_f.name], _default)

REFERENCE_KEYS = _FIELD_NAMES[:_FIELD_NAMES.index("provenance") + 1]
RECORD_KEYS = REFERENCE_KEYS  # the keys every reader may rely on (jaato-eval 0.3.4's)


def fields_reader(names: tuple[str, ...]):
    """A function reading only these fields of a store's JSON object, each decided
    exactly as `from_dict` decides it (what the streaming pivot reads of a line).
    It raises RecordError like `from_dict`."""
    # A string where a string is declared is kept as it is: the check runs for the rest.
    checks = tuple((name, _CHECKS[name], str if _WHAT[name].startswith("a string") else None)
                   for name in names)

    def read(data: Any) -> list[Any]:
        if type(data) is not dict or type(data.get("arm_id")) is not str:
            raise RecordError("not a result record (no string arm_id)")
        get = data.get
        return [v if type(v := get(name)) is plain else check(v, None, name)[0]
                for name, check, plain in checks]
    return read


def coerce(record: "ArmRecord | dict") -> ArmRecord:
    """A record from either form (a live ArmRecord, or a store's JSON object)."""
    return record if type(record) is ArmRecord else ArmRecord.from_dict(record)


# -- the producer -----------------------------------------------------------------------------
@functools.cache
def _provenance() -> dict[str, Any]:
    """Which SDK this process actually imported: a sweep's numbers are evidence about it."""
    import jaato_sdk  # only once an arm has run: plain pytest runs never pay for it
    version: str | None
    try:
        version = importlib.metadata.version("jaato-sdk")
    except importlib.metadata.PackageNotFoundError:
        version = getattr(jaato_sdk, "__version__", None)
    try:
        harness = importlib.metadata.version("pytest-jaato-eval")
    except importlib.metadata.PackageNotFoundError:
        harness = None
    return {"jaato_sdk_path": jaato_sdk.__file__, "jaato_sdk_version": version,
            "harness": "pytest-jaato-eval", "harness_version": harness}


def build_record(*, arm_id: str, task_id: str, profile_set: str, repeat: int, state: str,
                 blocked_reason: str | None, verdicts: list, run: Any, notes: list[str],
                 completion_nudges: int | None, extra: dict[str, Any],
                 budget_ceiling: dict | None = None, pool_limits: dict | None = None,
                 pool_on_arrival: dict | None = None,
                 mask: Callable[[Any], Any] | None = None) -> ArmRecord:
    """The record of an arm that just ended. `extra` holds further keys by name: a
    declared field is set, any other key is kept as written. `mask`: a masker
    (redact.Redactor) every string of the line goes through before it is typed."""
    verdicts = [v.to_dict() if hasattr(v, "to_dict") else dict(v) for v in verdicts]
    line = dict(
        # an instrument's limits only where it graded: a judge gated off or blocked did not
        caveats=instrument_caveats(v.get("grader_id") for v in verdicts
                                   if v.get("state") in (PASS, FAIL)), notes=list(notes),
        arm_id=arm_id, task_id=task_id, profile_set=profile_set,
        repeat=repeat, state=state, blocked_reason=blocked_reason,
        verdicts=verdicts, usage=dict(run.usage), duration_seconds=run.duration_seconds, turns=run.turns,
        finish_reason=run.finish_reason, payload_hash=payload_hash(run.payload),
        error=run.error, session_id=run.session_id, session_ids=list(run.session_ids),
        model=run.model, provider=run.provider,
        upstream_provider=None,      # not on the wire yet
        native_finish_reason=None,   # not on the wire yet
        completion_nudges=completion_nudges, budget_ceiling=budget_ceiling,
        pool_limits=pool_limits, pool_on_arrival=pool_on_arrival,
        provenance=dict(_provenance())) | extra
    # Built once, from the line: values from live objects (a str-valued enum, a Path) become
    # what the store holds, so the record a run keeps is the record a reader gets back.
    line = json.loads(json.dumps(line, default=str))
    return ArmRecord.from_dict(mask(line) if mask else line)


# -- a record's consistency beyond its types (validate, merge) --------------------------------
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
        sample = r.extra.get("sample_id")  # a dataset's row: task[sample]@set#repeat
        expected = f"{r.task_id}{f'[{sample}]' if sample is not None else ''}@{r.set_name}#{r.repeat}"
        if r.arm_id != expected:
            warnings.append(f"arm_id does not match task_id[sample_id]@profile_set#repeat "
                            f"({expected})")
    return problems, warnings
