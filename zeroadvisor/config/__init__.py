"""Text to document with positions: the hjson port DeepSpeed reads with, YAML, pointers, file reading."""
