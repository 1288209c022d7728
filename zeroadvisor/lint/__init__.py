"""The lint engine: rule contract, context, schema walk, findings."""
