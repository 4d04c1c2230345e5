"""Bridges to the tools users already work in (optional extras, imported lazily)."""
