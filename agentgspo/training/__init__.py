"""Training runs: the loop (``train``), its run folder, checkpoints and exact resume, metrics and the supervised
warm start. The top of the core: it may import every other wing; nothing in the core imports it but the
commands."""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
