"""The ``scripted_model`` pytest fixture's body (plugin.py declares the fixture and loads
this with the side of a run that has arms, at the fixture's first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from .server import ScriptedModel

if TYPE_CHECKING:
    from .script import Turn


def scripted_model_fixture() -> Iterator[Callable[..., ScriptedModel]]:
    """Body of a ``scripted_model`` pytest fixture: yields ``start(turns, **kwargs)``,
    which starts a :class:`ScriptedModel` and returns it; every server started through
    it is stopped at teardown.  Register it from the plugin with::

        from pytest_jaato_eval.testing.model_server import scripted_model_fixture
        scripted_model = pytest.fixture(scripted_model_fixture, name="scripted_model")

    and use it as::

        def test_x(scripted_model, tmp_path):
            model = scripted_model([Turn.tool("signal_completion", answer="ok")])
            model.write_profile(tmp_path / "cfg")
    """
    started: list[ScriptedModel] = []

    def start(turns: Iterable[Turn] = (), **kwargs: Any) -> ScriptedModel:
        model = ScriptedModel(turns, **kwargs).start()
        started.append(model)
        return model

    try:
        yield start
    finally:
        for model in reversed(started):
            model.stop()
