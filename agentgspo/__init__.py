"""agentgspo: train LLM agents with GSPO in multi-turn Gymnasium environments.

The top-level import is light (no torch): environments, tools and their tests need neither torch nor vLLM.
Heavy pieces (policy backends, the learner) live in submodules and are imported on use.
"""

from agentgspo.env import Action, ChatEnv, ToolCall
from agentgspo.registry import make, register

import agentgspo.envs  # noqa: E402,F401 -- registers the bundled env ids (their modules load on make)

__version__ = "0.1.0"
__all__ = ["Action", "ChatEnv", "ToolCall", "make", "register", "__version__"]
