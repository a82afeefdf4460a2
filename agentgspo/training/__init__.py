"""Training runs: the loop (``train``), its run folder, checkpoints and exact resume, metrics and the supervised
warm start. The top of the core: it may import every other wing; nothing in the core imports it but the
commands."""
