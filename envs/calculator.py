"""`agentgspo/Calculator-v0`: arithmetic that needs a tool call, then a final answer.

Turn 1, the model calls ``calculate`` with the expression; the tool's reply is the value; turn 2, the model
answers ``<answer>N</answer>``. Reward 1.0 for the right value in the answer, else 0.0. The numbers are too big for
a small model to multiply in its head, so the task is about using the tool and copying its result exactly.

Held out by seeds, not by a split: the questions are drawn from the seed (procedural, no finite task list), so
evaluation seeds from a range disjoint from the training seeds (the training loop's ``EVAL_SEEDS`` and
``TRAIN_SEED_BASE``) are held-out draws. They are not guaranteed unseen questions: of the 7.29 million, one trained
on may come up again by chance (with probability about questions trained / 7.29 million per evaluated one).
"""

from __future__ import annotations

import ast
import operator
import re
from typing import Any

from agentgspo.environments.env import Action, ChatEnv, Message
from agentgspo.environments.tool_calls import ToolCall

__all__ = ["calculate", "calculator_oracle", "calculator_wrong", "CalculatorEnv"]

SYSTEM_PROMPT = "Use the calculate tool, then reply <answer>N</answer>."
_ANSWER = re.compile(r"<answer>\s*(-?\d+)\s*</answer>")
_QUESTION = re.compile(r"What is (.+)\?")
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_MAX_DIGITS = 4000  # below Python's int-to-str limit (4300); bigger results are refused before they are computed
_MAX_BITS = int(_MAX_DIGITS * 3.33)


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large (at most 64)")
        if (
            isinstance(node.op, ast.Pow)
            and isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and (abs(left).bit_length() - 1) * right > _MAX_BITS
        ):  # e.g. ((9**64)**64)**64: checked before pow
            raise ValueError(f"result too large (more than {_MAX_DIGITS} digits)")
        value = _OPS[type(node.op)](left, right)
        if isinstance(value, int) and value.bit_length() > _MAX_BITS:
            raise ValueError(f"result too large (more than {_MAX_DIGITS} digits)")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported syntax {ast.dump(node)[:40]}; use numbers, + - * / // % ** and parentheses")


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression and return its value.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. "347*29+18".
    """
    if len(expression) > 200:
        raise ValueError("expression longer than 200 characters")
    value = _evaluate(ast.parse(expression.strip(), mode="eval").body)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _question(messages: list[Message]) -> str:
    match = _QUESTION.search(next(m["content"] for m in messages if m["role"] == "user"))
    return match.group(1) if match else ""


def calculator_oracle(messages: list[Message]) -> str:
    """Expert turn: call the tool with the question's expression, then answer with the tool's value."""
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        return ToolCall("calculate", {"expression": _question(messages)}).to_text()
    return f"<answer>{results[-1]}</answer>"


def calculator_wrong(messages: list[Message]) -> str:
    """A policy that always answers a wrong value without using the tool."""
    return "<answer>-1</answer>"


class CalculatorEnv(ChatEnv):
    """Questions ``What is A*B+C?`` with A in [100, 999], B in [10, 99], C in [10, 99]; one tool, ``calculate``.

    Args:
        system_prompt: the instructions; ``None`` sends none (a policy trained on demonstrations needs none, and
            the quickstart saves the tokens).
    """

    oracle = staticmethod(calculator_oracle)
    wrong = staticmethod(calculator_wrong)
    held_out_by = "seeds"  # procedural: disjoint seed ranges hold evaluations out

    def __init__(self, system_prompt: str | None = SYSTEM_PROMPT, **chat_env_kwargs: Any):
        super().__init__(tools=[calculate], **chat_env_kwargs)
        self.system_prompt = system_prompt
        self.expression = ""
        self.target = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Draw a new question (after the system prompt, if any); ``info["target"]`` is its answer."""
        super().reset(seed=seed)
        a, b, c = (int(self.np_random.integers(lo, hi)) for lo, hi in ((100, 1000), (10, 100), (10, 100)))
        self.expression = f"{a}*{b}+{c}"
        self.target = a * b + c
        messages = [{"role": "user", "content": f"What is {self.expression}?"}]
        if self.system_prompt is not None:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages, {"target": self.target}

    def respond(self, action: Action):
        """Score the ``<answer>`` of a turn without tool calls (1.0 when it is the target) and end the episode."""
        match = _ANSWER.search(action.content)
        correct = match is not None and int(match.group(1)) == self.target
        info = {"answered": match is not None, "correct": correct}
        return [], 1.0 if correct else 0.0, True, False, info
