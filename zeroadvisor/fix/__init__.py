"""Fixes: RFC 7396 merge patches, the text-preserving editor, atomic writes."""
