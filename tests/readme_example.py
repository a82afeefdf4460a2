"""A custom environment in about 30 lines: reverse a word with a tool, then answer it.

This file is the README's example, verbatim; tests/environments/test_env.py runs it so the two never drift apart.
"""

import gymnasium as gym

import agentgspo
from agentgspo.environments.env_checker import check_env, play


def reverse(text: str) -> str:
    """Reverse a string.

    Args:
        text: the string to reverse.
    """
    return text[::-1]


class ReverseEnv(agentgspo.ChatEnv):
    """Ask for a word reversed; reward 1.0 for the exact reversal."""

    def __init__(self, **kwargs):
        super().__init__(tools=[reverse], **kwargs)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.word = ["agent", "policy", "reward"][int(self.np_random.integers(3))]
        return [{"role": "user", "content": f"Reverse the word {self.word}"}], {}

    def respond(self, action):  # a turn without tool calls is the final answer
        return [], float(action.content.strip() == self.word[::-1]), True, False, {}

    @staticmethod
    def oracle(messages):  # call the tool, then copy its result
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if results:
            return results[-1]
        return agentgspo.ToolCall("reverse", {"text": messages[-1]["content"].split()[-1]}).to_text()


agentgspo.register("agentgspo/Reverse-v0", entry_point=ReverseEnv)
env = gym.make("agentgspo/Reverse-v0")
check_env(env)  # raises with "expected X, got Y" if the contract is broken
reward, terminated, messages = play(env, ReverseEnv.oracle, seed=0)
print(reward, messages)  # 1.0 [... user, assistant <tool_call>, tool, assistant answer]
