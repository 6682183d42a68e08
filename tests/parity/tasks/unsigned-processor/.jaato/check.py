def validate(payload, context):
    return []
