"""Environments and tools: the chat-env contract (``env``), its checker, tools and tool-call parsing, the registry
and the truncation wrappers. Level 1: imports nothing of agentgspo's but itself and the core (and Gymnasium, pydantic),
so envs and their tests need neither torch nor vLLM."""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
