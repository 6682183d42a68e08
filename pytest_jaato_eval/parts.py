"""The parts of an arm's two sides (task/sides.py hashes them) as a person reads them: what
a refused regrade and `compare` name when a part changed."""
from __future__ import annotations

AGENT_PARTS = {
    "fixture": "the fixture",
    "prompt": "the prompt",
    "agent": "the agent persona (input.agent)",
    "agent_params": "the agent's parameters",
    "harness": "the harness (kind, profile, profile set)",
    "profile": "the profile",
    "config": "the config root the agent was given",
    "sample": "the sample",
}

GRADER_PARTS = {
    "graders": "the graders",
    "files": "the graders' files",
    "sample": "the sample's fields the graders read",
}


def said(parts: list[str], words: dict[str, str] = AGENT_PARTS) -> str:
    """`the prompt and the fixture`: the changed parts as words."""
    named = [words.get(p, repr(p)) for p in parts]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
