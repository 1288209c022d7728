"""Integrations with CI services: the GitHub pull-request comment (github_comment.py) the Action runs."""
