"""What DeepSpeed 0.19.8 reads: the generated schema, effective settings, pydantic's lax coercion."""
