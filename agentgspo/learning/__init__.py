"""The learner: ``GSPOLearner`` (one rollout batch in, optimizer steps out) under accelerate, sharding (DDP, FSDP2,
DeepSpeed) and the memory estimate. Imports the objective, the models (routing replay, the experts) and the core."""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
