"""Recipes: runnable training scripts (`python recipes/NAME.py`), installed as ``agentgspo.recipes``."""
