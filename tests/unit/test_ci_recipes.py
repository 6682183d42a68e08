"""The CI recipes of docs/running.md, checked as far as offline tools allow.

The GitHub workflow is validated against the workflow schema check-jsonschema ships
(SchemaStore's, what editors and `check-jsonschema --builtin-schema github-workflows`
use), then for what a schema cannot see: every `needs` names a job, every
`${{ matrix.* }}` / `${{ env.* }}` is defined where it is used, and the harness is
installed from the checkout or a pinned git ref, never from a release PyPI lacks.
The Kubernetes Job is validated by kubernetes-validate against the API's own schema.
What no offline check shows: that the actions exist at the versions named, and that
GitHub accepts the expressions it evaluates.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from pytest_jaato_eval.testing.records import arm_record, write_store

DOC = Path(__file__).parents[2] / "docs" / "running.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
EXPRESSION = re.compile(r"\$\{\{\s*(\w+)\.(\w+)\s*\}\}")


def blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text()) if lang == kind]


def workflow() -> dict:
    (text,) = [b for b in blocks("yaml") if b.startswith("# .github/workflows/")]
    data = yaml.safe_load(text)
    # PyYAML reads the bare key `on` as True (YAML 1.1); GitHub reads YAML 1.2: "on".
    data["on"] = data.pop(True)
    return data


def job_spec() -> dict:
    (text,) = [b for b in blocks("yaml") if "kind: Job" in b]
    return yaml.safe_load(text)


def test_the_workflow_is_valid_against_githubs_workflow_schema():
    schema = json.loads(resources.files("check_jsonschema.builtin_schemas.vendor")
                        .joinpath("github-workflows.json").read_text())
    data = workflow()
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(data), key=str)
    assert not errors, [e.message for e in errors]
    # The schema works: a step with neither `uses` nor `run` is refused.
    data["jobs"]["merge"]["steps"].append({"name": "nothing"})
    assert list(jsonschema.Draft7Validator(schema).iter_errors(data))


def test_the_workflow_refers_only_to_what_it_defines():
    data = workflow()
    assert data["on"] == "workflow_dispatch"
    jobs = data["jobs"]
    top_env = set(data.get("env", {}))
    for name, job in jobs.items():
        needs = job.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            assert need in jobs, f"job {name} needs {need!r}, which is no job"
        matrix = set(job.get("strategy", {}).get("matrix", {}))
        for step in job["steps"]:
            text = json.dumps(step)
            env = top_env | set(step.get("env", {}))
            for scope, key in EXPRESSION.findall(text):
                if scope == "matrix":
                    assert key in matrix, f"{name}: matrix.{key} is not in its matrix"
                elif scope == "env":
                    assert key in env, f"{name}: env.{key} is not defined"
            for var in re.findall(r"\$([A-Z][A-Z_]+)\b", step.get("run", "")):
                assert var in env | {"GITHUB_STEP_SUMMARY"}, f"{name}: ${var} is not defined"


def test_the_harness_is_installed_from_the_checkout_or_a_pinned_git_ref():
    installs = []
    for job in workflow()["jobs"].values():
        for step in job["steps"]:
            for line in step.get("run", "").splitlines():
                if "pip install" in line:
                    installs.append(shlex.split(line.split("#")[0])[2:])
    assert len(installs) == 2  # one per job
    for args in installs:
        assert args == ["."], args  # the checkout, beside its tasks/
    text = DOC.read_text()
    assert "pytest-jaato-eval==" not in text  # no release that PyPI does not have
    pinned = re.findall(r'pip\s+install "(pytest-jaato-eval @ git\+https://[^"]+)"', text)
    assert pinned and all(re.search(r"@<commit>$", p) for p in pinned)


def test_the_kubernetes_job_is_valid_against_the_api_schema():
    data = job_spec()
    assert kubernetes_validate.validate(data, "1.29", strict=True)
    broken = job_spec()
    broken["spec"]["completions"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.29", strict=True)
    container = data["spec"]["template"]["spec"]["containers"][0]
    assert "--jaato-shard=$I/4" in container["args"][0]  # N is `completions`
    assert data["spec"]["completions"] == 4


def test_the_format_commands_run_as_written(tmp_path):
    (block,) = [b for b in blocks("bash") if "--format markdown" in b]
    write_store(tmp_path / "results.jsonl", [arm_record("t", "echo", 0, "PASS"),
                                             arm_record("t", "echo", 1, "FAIL")])
    for line in block.strip().splitlines():
        argv = shlex.split(line)
        assert argv[:3] == ["python", "-m", "pytest_jaato_eval"] and argv[-2] == ">"
        with open(tmp_path / argv[-1], "w") as out:
            done = subprocess.run([sys.executable, *argv[1:-2]], cwd=tmp_path, stdout=out,
                                  stderr=subprocess.PIPE, text=True, timeout=120)
        assert done.returncode == 0, done.stderr  # --exit-zero, with a FAIL in the store
    assert "| t | echo | 50% |" in (tmp_path / "pivot.md").read_text()
    assert json.loads((tmp_path / "pivot.json").read_text())["cells"][0]["n"] == 2
    assert (tmp_path / "pivot.csv").read_text().startswith("task,profile_set,n,")


def test_the_sweeps_artefact_keeps_the_merged_stores_transcripts():
    (upload,) = [s for s in workflow()["jobs"]["merge"]["steps"]
                 if s.get("with", {}).get("name") == "sweep-report"]
    kept = upload["with"]["path"].split()
    assert {"merged.jsonl", "merged.transcripts/", "report.html"} <= set(kept)
    ignored = (Path(__file__).parents[2] / ".gitignore").read_text().splitlines()
    assert {"shards/", "merged*.jsonl", "merged*.transcripts/"} <= set(ignored)
