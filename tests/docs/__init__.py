"""Tests of the documentation site (mkdocs.yml, docs/, the docstrings)."""
