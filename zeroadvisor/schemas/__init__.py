"""Generated data: the DeepSpeed config schema and the model-description schema (tools/ regenerates them)."""
