"""The example environment of docs/envs.md, verbatim, run through check_env, gymnasium.make and the runner.

If you change the example here, change it in docs/envs.md too (a test below checks they match).
"""

from __future__ import annotations

from pathlib import Path

# --- begin docs/envs.md example ---
import json
import re

from agentgspo import Action, ChatEnv, register

WORDS = ["gymnasium", "trajectory", "tokenizer", "sequence", "advantage", "rollout", "sandbox", "verifier"]


def count_letter(word: str, letter: str) -> int:
    """Count how many times a letter occurs in a word.

    Args:
        word: the word to search.
        letter: a single letter.
    """
    return word.count(letter)


def letters_oracle(messages):
    """Call the tool with the question's word and letter, then answer with its result."""
    letter, word = re.search(r"'(\w)' occur in (\w+)", messages[1]["content"]).groups()
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        call = {"name": "count_letter", "arguments": {"word": word, "letter": letter}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"
    return f"<answer>{results[-1]}</answer>"


class LetterCountEnv(ChatEnv):
    """How many times does a letter occur in a word? One tool, ``count_letter``; reward 1.0 for the right count."""

    oracle = staticmethod(letters_oracle)
    wrong = staticmethod(lambda messages: "<answer>-1</answer>")

    def __init__(self, **chat_env_kwargs):
        super().__init__(tools=[count_letter], **chat_env_kwargs)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        word = WORDS[int(self.np_random.integers(len(WORDS)))]
        letter = word[int(self.np_random.integers(len(word)))]
        self.target = word.count(letter)
        return [
            {"role": "system", "content": "Use the tool, then reply <answer>N</answer>."},
            {"role": "user", "content": f"How many times does the letter '{letter}' occur in {word}?"},
        ], {}

    def respond(self, action: Action):
        match = re.search(r"<answer>\s*(-?\d+)\s*</answer>", action.content)
        correct = match is not None and int(match.group(1)) == self.target
        return [], float(correct), True, False, {"correct": correct}


register("my/LetterCount-v0", entry_point=LetterCountEnv)
# --- end docs/envs.md example ---

import gymnasium as gym  # noqa: E402

from agentgspo.environments.env_checker import check_env, play  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "envs.md"


def _between(text: str, begin: str, end: str) -> str:
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


def test_the_doc_shows_this_example_verbatim():
    here = _between(
        Path(__file__).read_text(), "# --- begin docs/envs.md example ---", "# --- end docs/envs.md example ---"
    )
    assert here in DOC.read_text(), "docs/envs.md and tests/envs/test_docs_example.py disagree; copy one to the other"


def test_the_example_passes_check_env_and_its_policies_score_one_and_zero():
    env = gym.make("my/LetterCount-v0")
    check_env(env)
    for seed in range(10):
        assert play(env, letters_oracle, seed=seed)[0] == 1.0
        assert play(env, env.unwrapped.wrong, seed=seed)[0] == 0.0
