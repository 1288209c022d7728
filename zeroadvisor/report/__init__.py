"""Renderers: findings (and estimates) to text, json, sarif, github and markdown."""
