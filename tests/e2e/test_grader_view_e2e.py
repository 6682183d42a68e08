"""What a grader sees, attacked from inside a real session: the agent's code, run by a grader
(its self-test), reads no other grader's file and changes nothing the next grader reads;
honest graders that build and test the agent's code still pass; an author's fixture link
inside the fixture works; a tool the profile leaves to a person is denied, not BLOCKED.

One run of the plugin's own confined daemon holds every case (they do not interfere)."""
from __future__ import annotations

import pytest
import yaml
from jaato_project import shell_agent

from pytest_jaato_eval.engine.sandbox import probe

pytestmark = [pytest.mark.daemon, pytest.mark.skipif(
    probe()[0] is None, reason=f"no sandbox on this machine: {probe()[1]}")]

KEY = "grep -qx PLATYPUS answer.txt\n"
# The agent's self-test, which the task's first grader runs as graders of coding tasks do:
# it looks for every other grader's file it can reach and writes what it finds as the answer,
# then changes the file the next grader reads.
SELFTEST = """\
for f in "$JAATO_EVAL_CONFIG_ROOT"/checks/* "$JAATO_EVAL_CONFIG_ROOT"/keys/*; do
  cat "$f" 2>/dev/null
done > seen.txt
ls -R "$JAATO_EVAL_CONFIG_ROOT" >> seen.txt 2>&1
grep -o 'PLATYPUS' seen.txt | head -1 > answer.txt
cat seen.txt
echo right > result.txt
exit 0
"""
# The agent's script that searches the whole file system it sees for the key and copies it.
FIND = """\
f=$(find / \\( -path /proc -o -path /sys -o -path /usr -o -path /dev \\) -prune \\
    -o -name expected.txt -print 2>/dev/null | head -1)
echo "found:$f" > found.txt
test -n "$f" && cp "$f" answer.txt
true
"""
MAKEFILE = """\
test: prog
\t./prog | grep -qx 42
prog: prog.c
\tcc -o prog prog.c
"""
PROG = '#include <stdio.h>\nint main(void) { printf("42\\n"); return 0; }\n'


def asker(command: str) -> dict:
    """An echo agent whose one tool call its profile leaves to a person (`ask`)."""
    profile = shell_agent("asker", command)
    profile["plugin_configs"]["permission"] = {"policy": {"defaultPolicy": "ask"}}
    return profile


def test_graders_see_the_workspace_as_the_agent_left_it_and_their_own_files_only(project):
    # 1. the self-test that reads the next grader's answer key (a file: grader, and a key
    #    spelled out in a run: grader) and writes it where the key is checked
    project.task("a-key-thief", profile=shell_agent("thief", "sh plant.sh"), graders=[
        {"kind": "script", "run": "sh ./selftest.sh"},
        {"kind": "script", "file": "checks/answer.sh"},
        {"kind": "script", "run": 'grep -qxf "$JAATO_EVAL_CONFIG_ROOT/keys/expected.txt" '
                                  'answer.txt'}])
    project.write("tasks/a-key-thief/fixture/plant.sh",
                  f"cat > selftest.sh <<'EOF'\n{SELFTEST}EOF\necho wrong > result.txt\n")
    project.write("tasks/a-key-thief/.jaato/checks/answer.sh", KEY).chmod(0o755)
    project.write("tasks/a-key-thief/.jaato/keys/expected.txt", "PLATYPUS\n")
    # 2. the self-test that changes the file the next grader reads
    project.task("b-changer", profile=shell_agent("changer", "sh plant.sh"), graders=[
        {"kind": "script", "run": "sh ./selftest.sh"},
        {"kind": "script", "run": "grep -qx right result.txt"}])
    project.write("tasks/b-changer/fixture/plant.sh",
                  f"cat > selftest.sh <<'EOF'\n{SELFTEST}EOF\necho wrong > result.txt\n")
    # 3. honest: a grader builds and tests the agent's code with its own Makefile, the next
    #    one checks the source it left (not what the build made)
    project.task("c-maker", profile=shell_agent("maker", "sh write.sh"), graders=[
        {"kind": "script", "run": "make test"},
        {"kind": "script", "run": "test -f prog.c && test ! -e prog"}])
    project.write("tasks/c-maker/fixture/write.sh",
                  f"cat > Makefile <<'EOF'\n{MAKEFILE}EOF\ncat > prog.c <<'EOF'\n{PROG}EOF\n")
    # 4. honest: a fixture holding a link inside itself
    project.task("d-linked", graders=[{"kind": "script", "run": "grep -qx kept data/link.txt"}])
    project.write("tasks/d-linked/fixture/data/real.txt", "kept\n")
    (project.root / "tasks/d-linked/fixture/data/link.txt").symlink_to("real.txt")
    # 5. a tool call its profile leaves to a person: denied, and the arm is graded
    project.task("e-asker", profile=asker("echo asked > asked.txt"),
                 graders=[{"kind": "script", "run": "test -f asked.txt"}])
    project.task("f-honest")
    # 6. W5: a key the grader reads unspelled is nowhere the confined agent can find it
    project.task("g-finder", profile=shell_agent("finder", "sh find.sh"), graders=[
        {"kind": "script", "run": 'cmp -s "$JAATO_EVAL_CONFIG_ROOT"/expected.txt answer.txt'},
        {"kind": "script", "run": "grep -qx found: found.txt"}])
    project.write("tasks/g-finder/.jaato/expected.txt", "PLATYPUS\n")
    project.write("tasks/g-finder/fixture/find.sh", FIND)
    result = project.run("tasks", "--jaato-sandbox=bwrap", "-p", "no:randomly",
                         shared_daemon=False)
    by = {r["task_id"]: r for r in project.records()}
    thief = by["a-key-thief"]["verdicts"]
    assert [v["state"] for v in thief] == ["PASS", "FAIL", "FAIL"], thief
    seen = "\n".join(thief[0]["evidence"])
    assert "PLATYPUS" not in seen and "answer.sh" not in seen and "expected.txt" not in seen, seen
    assert [v["state"] for v in by["b-changer"]["verdicts"]] == ["PASS", "FAIL"]
    assert by["c-maker"]["state"] == "PASS", by["c-maker"]["verdicts"]
    assert by["d-linked"]["state"] == "PASS", by["d-linked"]
    asked = by["e-asker"]
    assert asked["state"] == "FAIL", asked  # graded: the tool never ran
    assert [v["grader_id"] for v in asked["verdicts"]] == ["script:test -f asked.txt"]
    assert any("permission: 1 tool call(s) asked" in n and "cli_based_tool" in n
               for n in asked["notes"]), asked["notes"]
    assert by["f-honest"]["state"] == "PASS"
    finder = by["g-finder"]["verdicts"]
    assert [v["state"] for v in finder] == ["FAIL", "PASS"], finder  # it found nothing
    assert result.ret == 1


def test_a_fixture_link_out_of_the_fixture_is_a_manifest_error_naming_it(project):
    project.task("escapes")
    (project.root / "tasks/escapes/fixture/secret").symlink_to("../../../etc-like")
    result = project.run("tasks", "--co")
    out = result.stdout.str()
    assert ("environment.fixture: 'secret' is a link to '../../../etc-like', which leaves "
            "the fixture") in out, out
    assert result.ret != 0


def test_a_python_arm_whose_fixture_links_out_is_that_tests_collection_error(project):
    project.write(".jaato/profiles/echo/writer.yaml", yaml.safe_dump(
        shell_agent("writer", "true")))
    project.write("fixture/seed.txt", "seed\n")
    (project.root / "fixture" / "out").symlink_to("/etc/hostname")
    project.write("arms/test_linked.py", """
        import pytest


        @pytest.mark.jaato(config_root="../.jaato", fixture="../fixture", profile="writer",
                           profile_set="echo")
        def test_it(jaato_arm):
            jaato_arm.run("go")
        """)
    result = project.run("arms", "--co")
    out = result.stdout.str()
    assert "fixture: 'out' is a link to the absolute path '/etc/hostname'" in out, out
    assert result.ret != 0
