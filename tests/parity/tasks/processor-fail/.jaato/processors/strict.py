def validate(payload, context):
    return ['answer is not STEADY'] if payload.get('answer') != 'STEADY' else []
