"""A test env whose reward varies with a random policy's output (so GSPO has non-zero advantages from step 1).

Registered on import as ``agentgspo/Parity-v0``; subprocesses make it with
``gym.make("parity_env:agentgspo/Parity-v0")``.
"""

from agentgspo import ChatEnv, register


class ParityEnv(ChatEnv):
    """One turn: reward 1 when the reply has an even number of characters."""

    oracle = staticmethod(lambda messages: "ok")
    wrong = staticmethod(lambda messages: "odd")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": f"Say something ({seed})."}], {}

    def respond(self, action):
        return [], float(len(action.text) % 2 == 0), True, False, {}


register("agentgspo/Parity-v0", entry_point=ParityEnv)
