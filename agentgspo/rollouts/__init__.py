"""Rollouts: the runner that plays N x G episodes (``rollout``) and the producer that plays them ahead of the
learner (``producer``). They speak the core's vocabulary (the renderer, the trajectory record, the sampling
protocol) and play the environments; never the policy backends, the objective or the learner."""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
