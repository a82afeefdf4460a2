"""Training runs: the loop (``train``), its run folder, checkpoints and exact resume, metrics and the supervised
warm start. Level 3: it may import every folder below it; only the recipes and the commands import it."""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
