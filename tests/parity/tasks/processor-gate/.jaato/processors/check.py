def validate(payload, context):
    return [] if payload.get('answer') == 'READY' else ['not READY']
