"""The vocabulary every other part of agentgspo shares, on the lowest level: it imports nothing of ours above it.

Standard library, gymnasium and pydantic only (no torch), so that any part, the judge's command line included,
may import it without weight.
"""
