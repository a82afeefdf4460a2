"""The learner: ``GSPOLearner`` (one rollout batch in, optimizer steps out) under accelerate, with the MoE pieces
(routing replay, the atomics-free experts), sharding (DDP, FSDP2, DeepSpeed) and the memory estimate. Imports the
objective and records wings."""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
