"""`./dev`, the project's entry point, run on a copy of its own with the system's tools stubbed
on PATH: what it decides before any command of the project runs."""
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _checkout(tmp_path: Path) -> Path:
    """A checkout whose virtualenv is built: `./dev` goes straight to the command."""
    here = tmp_path / "checkout"
    (here / "pytest_jaato_eval").mkdir(parents=True)
    for name in ("dev", "pyproject.toml"):
        (here / name).write_bytes((ROOT / name).read_bytes())
    (here / "dev").chmod(0o755)
    bin_dir = here / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    done = subprocess.run(["sha256sum"], input=(here / "pyproject.toml").read_bytes(),
                          capture_output=True, check=True).stdout.decode()[:16]
    (here / ".venv" / f".installed-{done}").touch()
    (here / ".venv" / ".compiled").touch()
    return here


def _stubbed(tmp_path: Path, ldconfig: str) -> tuple[Path, dict, Path]:
    """A built checkout, run as root by CI on a machine whose report tools are all there but
    the libraries `ldconfig` lists; `apt-get` only notes its calls in the file returned."""
    here = _checkout(tmp_path)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    called = tmp_path / "apt-get-called"
    _stub(stubs, "apt-get", f'echo "$1" >> {called}')
    _stub(stubs, "id", 'if [ "$1" = "-u" ]; then echo 0; else exec /usr/bin/id "$@"; fi')
    for tool in ("chromium", "pdftoppm", "bwrap"):
        _stub(stubs, tool, "exit 0")
    _stub(stubs, "ldconfig", ldconfig)
    return here, {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "CI": "true"}, called


def _dev(here: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(here / "dev"), "true"], env=env, capture_output=True, text=True,
                          timeout=120)


def test_ci_never_reaches_apt_on_a_machine_that_has_everything(tmp_path):
    """The check for the report tests' system packages: ldconfig's long list read to its
    end, so ldconfig is never killed by SIGPIPE and the check never fails by chance (which
    ran apt-get on a machine that had everything)."""
    # The library is named first, then far more than a pipe holds: a reader that stops at
    # the first match leaves ldconfig writing to a closed pipe, every time.
    here, env, called = _stubbed(tmp_path, (
        'echo "\tlibpangoft2-1.0.so.0 (libc6,x86-64) => /usr/lib/libpangoft2-1.0.so.0"\n'
        'i=0; while [ $i -lt 4000 ]; do\n'
        '  echo "\tlibsomething$i.so.1 (libc6,x86-64) => /usr/lib/libsomething$i.so.1"\n'
        '  i=$((i + 1)); done'))
    for _ in range(15):
        done = _dev(here, env)
        assert done.returncode == 0, done.stderr
        assert "installing chromium" not in done.stderr, done.stderr
    assert not called.exists(), called.read_text()


def test_ci_installs_what_is_missing(tmp_path):
    """The same check still sees a library that is not there."""
    here, env, called = _stubbed(tmp_path, 'echo "\tlibc.so.6 (libc6,x86-64) => /lib/libc.so.6"')
    done = _dev(here, env)
    assert done.returncode == 0, done.stderr
    assert called.read_text().split() == ["update", "install"], done.stderr
