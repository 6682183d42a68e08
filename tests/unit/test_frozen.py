"""What a frozen object holds cannot change: settings apart from state.

A frozen dataclass is what something decided once (a run's settings, a sample, a command
line); what a run accumulates is a mutable object of its own, owned by whoever changes it
(`arm.ArmState`, the worker's). A list, dict or set inside a frozen object would be state
passing for settings, so no field of one is declared as one, nor defaults to one.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import types
import typing

import pytest

import pytest_jaato_eval

MUTABLE = (list, dict, set, bytearray)

# The arm's record is the store's line, a JSON document read by every view: its lists and
# mappings are frozen together with every reader's, in a change of their own.
NOT_YET = {"pytest_jaato_eval.results.record.ArmRecord"}


def _modules():
    for info in pkgutil.walk_packages(pytest_jaato_eval.__path__, "pytest_jaato_eval."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


def _frozen_dataclasses():
    for module in _modules():
        for obj in vars(module).values():
            if (isinstance(obj, type) and obj.__module__ == module.__name__
                    and dataclasses.is_dataclass(obj) and obj.__dataclass_params__.frozen):
                yield obj


def _mutable_in(annotation) -> bool:
    """Whether a type names a list, dict or set anywhere (`list[str] | None`, `tuple[dict]`)."""
    origin = typing.get_origin(annotation)
    if annotation in MUTABLE or origin in MUTABLE:
        return True
    return any(_mutable_in(arg) for arg in typing.get_args(annotation))


def _declared(cls, f: dataclasses.Field) -> bool:
    """Whether the field's annotation names a mutable container; one naming a type imported
    only for type checking is read as written."""
    annotation = f.type
    if isinstance(annotation, str):
        namespace = {**vars(typing), **vars(importlib.import_module(cls.__module__)),
                     cls.__name__: cls}
        try:
            annotation = eval(annotation, namespace)  # noqa: S307 - the package's own source
        except NameError:
            return re.search(r"\b(list|dict|set|bytearray)\b", annotation) is not None
    return _mutable_in(annotation)


def mutable_fields(cls) -> list[str]:
    out = []
    for f in dataclasses.fields(cls):
        factory = f.default_factory
        made = factory() if factory is not dataclasses.MISSING else f.default
        if _declared(cls, f) or isinstance(made, MUTABLE):
            out.append(f.name)
    return out


def test_no_frozen_dataclass_holds_a_mutable_container():
    found = {f"{cls.__module__}.{cls.__qualname__}": mutable_fields(cls)
             for cls in _frozen_dataclasses()}
    assert "pytest_jaato_eval.arm.ArmSettings" in found  # the walk reaches the package
    bad = {name: fields for name, fields in found.items() if fields and name not in NOT_YET}
    assert bad == {}


def test_the_check_sees_a_list_however_it_is_declared():
    @dataclasses.dataclass(frozen=True)
    class Bare:
        a: tuple[int, ...] = ()
        b: list[int] | None = None

    @dataclasses.dataclass(frozen=True)
    class Nested:
        a: tuple[dict, ...] = ()

    @dataclasses.dataclass(frozen=True)
    class Defaulted:
        a: typing.Any = dataclasses.field(default_factory=set)

    assert mutable_fields(Bare) == ["b"]
    assert mutable_fields(Nested) == ["a"]
    assert mutable_fields(Defaulted) == ["a"]


def test_what_a_frozen_object_is_given_it_keeps_read_only(tmp_path):
    from pytest_jaato_eval.arm import ArmSettings, ArmState
    from pytest_jaato_eval.engine.ceiling import Ceiling
    from pytest_jaato_eval.task.samples import Sample
    from pytest_jaato_eval.testing.script import ToolCall

    row = {"x": 1}
    sample = Sample("s", row)
    row["x"] = 2  # the caller's dict changes; the sample does not
    assert sample.fields["x"] == 1
    with pytest.raises(TypeError):
        sample.fields["x"] = 3  # type: ignore[index]
    call = ToolCall("write", {"path": "a"})
    assert isinstance(call.args, types.MappingProxyType)
    settings = ArmSettings(workspace_root=tmp_path, keep_workspaces="never",
                           ceiling=Ceiling(0), run_id="r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.run_id = "other"  # type: ignore[misc]
    state = ArmState()  # what the arms accumulate: the worker's, and changeable
    state.made.append(tmp_path)
    assert not dataclasses.is_dataclass(state) or not type(state).__dataclass_params__.frozen
