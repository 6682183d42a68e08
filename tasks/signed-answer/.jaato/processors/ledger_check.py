"""Processor grader: the payload must be backed by the ledger, not only claimed."""


def validate(payload, context):
    errors = []
    if payload.get("answer") != "42":
        errors.append(f"answer is {payload.get('answer')!r}, expected '42'")
    # Reading tool_calls on an unfaithful ledger (no history) BLOCKs the verdict
    # instead of grading against nothing.
    signs = [c for c in context.tool_calls if c["name"] == "signal_completion"]
    if len(signs) != 1:
        errors.append(f"the ledger holds {len(signs)} signal_completion calls, expected 1")
    elif not signs[0]["success"] or signs[0]["args"] != payload:
        errors.append("the ledger's signal_completion does not match the payload")
    return errors
