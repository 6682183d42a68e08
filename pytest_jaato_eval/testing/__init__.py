"""Reusable test helpers for task authors and for this project's own suite.

``model_server`` holds :class:`~pytest_jaato_eval.testing.model_server.ScriptedModel`,
a scripted OpenAI-compatible server that the jaato daemon's ``vllm`` provider can
talk to, so an agent's turns (tool calls, prose, usage, faults) are fixed in advance.
"""
