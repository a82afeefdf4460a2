"""Torch model code, one level above the core: the experts implementation for HF MoE models (``moe``), routing
replay's hooks and its record (``routing_replay``), the tiny chat policy built offline (``tiny``) and the loader's
quiet mode (``quiet``). The policy backends, the learner and the rollouts use it; it imports only the core."""

__all__: list[str] = []  # the modules hold the API (each defines its own __all__)
