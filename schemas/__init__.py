"""Generated JSON Schemas (see tools/); shipped as package data."""
