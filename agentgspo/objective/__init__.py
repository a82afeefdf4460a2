"""The objective: group advantages, log-probs from logits, micro-batches of trajectories and the GSPO / GSPO-token /
GRPO losses (arXiv 2507.18071), each a small function with its formula. Imports torch and the core only."""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
