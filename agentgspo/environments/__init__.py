"""Environments and tools: the chat-env contract (``env``), its checker, tools and tool-call parsing, the registry
and the truncation wrappers. The ground floor: imports nothing of agentgspo's but itself (and Gymnasium, pydantic),
so envs and their tests need neither torch nor vLLM."""
