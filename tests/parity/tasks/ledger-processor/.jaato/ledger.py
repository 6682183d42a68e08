def validate(payload, context):
    names = [c.get("name") for c in context.tool_calls]
    return [] if "signal_completion" in names else [f"no signal_completion in {names}"]
