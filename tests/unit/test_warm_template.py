"""The private daemon's PYTHONPATH warms jaato's runner template and nothing else: its
`sitecustomize` imports a session's modules in the template only (and freezes its heap for
the runners it forks), leaves PYTHONPATH as the
user had it for what the template starts, and still runs the `sitecustomize` it shadows."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from pytest_jaato_eval.engine.daemon import WARM_TEMPLATE, warm_template_path

PROBE = ("import json, os, sys; print(json.dumps({'warm': 'jaato_server.shared.jaato_client' "
         "in sys.modules, 'providers': sorted(m for m in sys.modules if m.endswith("
         "'.echo.provider')), 'path': os.environ.get('PYTHONPATH'), 'theirs': getattr("
         "sys.modules.get('sitecustomize'), 'MARK', None), 'frozen': frozen()}))")
# What a runner forked from the process inherits frozen, and what is frozen after the runner
# made objects and forked a process of its own (gc.get_freeze_count in the child).
FORKED = ("import gc, os\n"
          "def frozen():\n"
          "    r, w = os.pipe()\n"
          "    if os.fork() == 0:\n"
          "        inherited = gc.get_freeze_count()\n"
          "        made = [[] for _ in range(50_000)]\n"
          "        if os.fork() == 0:\n"
          "            os._exit(0)\n"
          "        os.wait()\n"
          "        os.write(w, f'{inherited} {gc.get_freeze_count()}'.encode()); os._exit(0)\n"
          "    os.close(w); os.wait(); return [int(n) for n in os.read(r, 64).split()]\n")


def probe(tmp_path, *argv: str) -> dict:
    theirs = tmp_path / "theirs"
    theirs.mkdir(exist_ok=True)
    (theirs / "sitecustomize.py").write_text("MARK = 'the user\\'s own ran'\n")
    env = {**os.environ, "PYTHONPATH": warm_template_path(str(theirs))}
    out = subprocess.run([sys.executable, "-c", FORKED + PROBE, *argv], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out)


def test_the_template_imports_a_sessions_modules_and_leaves_pythonpath_as_it_was(tmp_path):
    seen = probe(tmp_path, "--template-mode")
    assert seen["warm"] is True
    assert seen["providers"] == ["jaato_server.shared.plugins.model_provider.echo.provider"]
    assert seen["path"] == str(tmp_path / "theirs")  # the runners and the agent's tools
    assert seen["theirs"] == "the user's own ran"
    inherited, after_its_own_fork = seen["frozen"]
    assert inherited > 10_000  # a runner's collections skip what it inherited
    assert after_its_own_fork == inherited  # and still collect what its sessions make


def test_any_other_process_of_the_daemon_only_runs_the_sitecustomize_it_shadows(tmp_path):
    seen = probe(tmp_path)
    assert seen["warm"] is False and seen["providers"] == [] and max(seen["frozen"]) < 1_000
    assert seen["path"].split(os.pathsep) == [WARM_TEMPLATE, str(tmp_path / "theirs")]
    assert seen["theirs"] == "the user's own ran"


def test_without_a_sitecustomize_of_the_users_the_daemons_path_is_the_warm_ups_alone():
    assert warm_template_path(None) == WARM_TEMPLATE
    assert warm_template_path("") == WARM_TEMPLATE
