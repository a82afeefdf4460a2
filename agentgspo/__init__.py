"""agentgspo: train LLM agents with GSPO in multi-turn Gymnasium environments.

The top-level import is light (no torch): environments, tools and their tests need neither torch nor vLLM.
Heavy pieces (policy backends, the learner) live in submodules and are imported on use.
"""

from agentgspo import _moved
from agentgspo.environments.env import Action, ChatEnv, ToolCall
from agentgspo.environments.registry import make, register

_moved.install()  # the old module paths (agentgspo.loss, ...) import their new modules, with a DeprecationWarning

import agentgspo.envs  # noqa: E402,F401 -- registers the bundled env ids (their modules load on make)

__version__ = "0.2.0"
__all__ = ["Action", "ChatEnv", "ToolCall", "make", "register", "__version__"]
