"""Who plays an eval: policy backends, an OpenAI-compatible chat endpoint, and two scripted agents.

Every agent is a :class:`~agentgspo.policy.base.PolicyBackend` with a ``renderer``, so the rollout runner records
its turns token-exactly like any policy's:

- ``policy``: any backend of :func:`agentgspo.policy.factory.make_backend` (``hf``, ``vllm``, ``server``).
- ``chat``: :class:`ChatEndpointAgent`, a model behind an OpenAI-compatible ``/chat/completions`` endpoint:
  the conversation goes out as chat messages with the env's tools (assistant tool calls as ``tool_calls``, tool
  results as ``tool`` messages with their ``tool_call_id``), the reply comes back as text plus ``tool_calls``,
  written in the env's ``<tool_call>{json}</tool_call>`` form. Its ids are the reply tokenized with a local
  tokenizer (for the record and the viewer), its log-probs 0.0: an API gives no ids to train on. A prompt the
  endpoint refuses as longer than the model's context (HTTP 400, e.g. vLLM's "This model's maximum context length
  is ...") ends the episode as a context overflow (``finish_reason="context"``, no ids), a counted failure like a
  policy running out of context; a refused key, model or URL (401, 403, 404) stops the eval
  (:class:`~agentgspo.policy.base.PolicyConfigurationError`, naming the fix): nothing is recorded, so the same
  command resumes once it is fixed.
- ``reference`` / ``wrong``: :class:`ShippedSolutionAgent`, which submits the problem's shipped solutions
  (``reference``: run the examples, then submit an accepted solution, C++ when shipped; ``wrong``: submit a solution the
  tests must reject, ``wrong[sample % len(wrong)]``, or ``print(0)`` where none is shipped), then stop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from agentgspo.core.chat import ChatRenderer
from agentgspo.core.sampling import PolicyConfigurationError, SampledTurn, SampleRequest
from agentgspo.policy.base import is_context_overflow
from agentgspo.policy.loading import model_folder
from agentgspo.environments.tool_calls import ToolCall, parse_tool_calls

__all__ = ["load_renderer", "ShippedSolutionAgent", "openai_messages", "reply_text", "ChatEndpointAgent"]

AGENTS = ("policy", "chat", "reference", "wrong")
FALLBACK_WRONG = {"name": "print(0) (no wrong solution shipped)", "lang": "py", "code": "print(0)\n"}
_LANG_NAMES = {"py": "python", "cpp": "cpp"}


def load_renderer(tokenizer_path: str = "tiny") -> Any:
    """A :class:`~agentgspo.core.chat.ChatRenderer` of a tokenizer folder (``"tiny"``: the embedded tiny
    policy's)."""
    from transformers import AutoTokenizer

    return ChatRenderer(AutoTokenizer.from_pretrained(model_folder(tokenizer_path)))


def _text_turn(renderer: Any, text: str, request: SampleRequest, finish_reason: str = "stop") -> SampledTurn:
    """``text`` as a sampled turn: its ids with the end-of-turn id (``finish_reason == "stop"``), log-probs 0.0."""
    ids = renderer.encode(text)
    if finish_reason == "stop":
        ids.append(renderer.end_of_turn_id)
    return SampledTurn(token_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish_reason)


class ShippedSolutionAgent:
    """Submits each problem's shipped solutions (``kind`` ``"reference"`` or ``"wrong"``, see the module docstring).

    ``tasks``: the env's tasks (objects with ``statement``, ``references`` ``{lang: code}`` and ``wrong``
    ``[{"name", "lang", "code"}]``); the posed task is found by its statement, the first user message.
    """

    logprob_semantics = "none"  # scripted: log-probs 0.0

    def __init__(self, kind: str, tasks: Sequence[Any], renderer: Any, sample: int = 0):
        if kind not in ("reference", "wrong"):
            raise ValueError(f"kind: expected 'reference' or 'wrong', got {kind!r}")
        self.kind, self.renderer, self.sample_index = kind, renderer, sample
        self.end_of_turn_id = renderer.end_of_turn_id
        self.by_statement = {task.statement: task for task in tasks}

    def for_sample(self, sample: int) -> ShippedSolutionAgent:
        """This agent playing sample ``sample`` (the ``wrong`` agent cycles through the shipped wrong solutions)."""
        bound = ShippedSolutionAgent.__new__(ShippedSolutionAgent)
        bound.__dict__.update(self.__dict__, sample_index=sample)
        return bound

    def solution(self, task: Any, sample: int) -> dict[str, str]:
        """``{"name", "lang", "code"}`` this agent submits for ``task`` in sample ``sample``."""
        if self.kind == "wrong":
            return task.wrong[sample % len(task.wrong)] if task.wrong else FALLBACK_WRONG
        if not task.references:
            raise ValueError(
                f"problem {task.problem.name!r} ships no reference solution; the reference agent cannot play it"
            )
        # C++ first: the problem set's required, validated reference, with the most room under the time limit
        lang = "cpp" if "cpp" in task.references else next(iter(task.references))
        return {"name": f"reference ({lang})", "lang": lang, "code": task.references[lang]}

    def turn_text(self, messages: Sequence[dict[str, Any]], sample: int) -> str:
        """The next assistant turn: examples (reference only), then a submission, then a closing line."""
        statement = next((m["content"] for m in messages if m["role"] == "user"), "")
        task = self.by_statement.get(statement)
        if task is None:
            raise ValueError("the posed statement is not one of the eval's problems")
        solution = self.solution(task, sample)
        lang = _LANG_NAMES.get(solution["lang"], solution["lang"])
        turns = sum(m["role"] == "assistant" for m in messages)
        steps = ["run_samples", "submit"] if self.kind == "reference" else ["submit"]
        if turns < len(steps):
            return (
                f"Using {solution['name']}.\n"
                + ToolCall(steps[turns], {"code": solution["code"], "lang": lang}).to_text()
            )
        return "That was my submission."

    async def sample(self, request: SampleRequest) -> SampledTurn:
        """One scripted turn for this agent's sample index."""
        return _text_turn(self.renderer, self.turn_text(request.messages, self.sample_index), request)

    def close(self) -> None:
        """Nothing to release."""


# ----------------------------------------------------------------------------------------------- chat endpoint


def openai_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The env's chat history as OpenAI chat messages: an assistant turn's ``<tool_call>`` blocks become
    ``tool_calls`` with ids ``call_T_J``; the tool messages after it get those ids in order (a tool message with no
    call left to answer, e.g. a parse-error notice, goes as a user message)."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for turn, message in enumerate(messages):
        role = message["role"]
        if role == "assistant":
            calls, _ = parse_tool_calls(message["content"])
            entry: dict[str, Any] = {"role": "assistant", "content": message["content"]}
            if calls:
                ids = [f"call_{turn}_{j}" for j in range(len(calls))]
                head = message["content"].split("<tool_call>", 1)[0].strip()
                entry = {
                    "role": "assistant",
                    "content": head or None,
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for i, c in zip(ids, calls)
                    ],
                }
                pending = ids
            else:
                pending = []
            out.append(entry)
        elif role == "tool":
            if pending:
                out.append({"role": "tool", "tool_call_id": pending.pop(0), "content": message["content"]})
            else:
                out.append({"role": "user", "content": message["content"]})
        else:
            out.append({"role": role, "content": message["content"]})
    return out


def reply_text(message: dict[str, Any]) -> str:
    """An OpenAI chat reply (``content`` and ``tool_calls``) as env action text with ``<tool_call>`` blocks."""
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = None
        if isinstance(arguments, dict):
            parts.append(ToolCall(str(function.get("name", "")), arguments).to_text())
        else:  # keep the malformed call visible: the env answers it with a parse error
            parts.append(f'<tool_call>{{"name": {json.dumps(function.get("name"))}, "arguments": {raw}}}</tool_call>')
    return "\n".join(p for p in parts if p)


_REFUSAL_FIXES = {
    401: "the endpoint refused the API key: put the right key in the environment variable --chat-api-key-env names "
    "(default OPENAI_API_KEY)",
    403: "the key may not use this model or endpoint: check the key (--chat-api-key-env) and --chat-model",
    404: "check --chat-url (the API base with its /v1, e.g. http://127.0.0.1:8000/v1) and --chat-model (a model the "
    "server serves: GET <chat-url>/models lists them)",
}


class ChatEndpointAgent:
    """A model behind an OpenAI-compatible chat-completions endpoint (see the module docstring).

    Args:
        base_url: the API base, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        model: the ``model`` field of each request.
        renderer: local tokenizer for the recorded ids.
        tools: OpenAI tool schemas sent with every request (the env's ``tool_schemas``).
        api_key: sent as ``Authorization: Bearer``; ``None``: no header.
        timeout_s, retries: per request; connection errors and 408/429/5xx are retried with backoff. A prompt
            refused as longer than the model's context (:func:`~agentgspo.policy.base.is_context_overflow`) is a
            ``"context"`` turn (no ids): the rollout ends the episode as ``context_overflow``, a counted failure.
            401, 403 and 404 raise :class:`~agentgspo.policy.base.PolicyConfigurationError` naming the fix (the
            eval stops); any other 4xx raises RuntimeError (the rollout records it as ``sampler_error``, excluded
            from pass@k).
        max_concurrency: most requests in flight.

    Sampling: ``temperature``, ``top_p`` and, when on, ``top_k`` (not an OpenAI field, so it is only sent when
    > 0; vLLM and SGLang accept it). Log-probs are ``"none"``: an API returns text, recorded with 0.0.
    """

    logprob_semantics = "none"

    def __init__(
        self,
        base_url: str,
        model: str,
        renderer: Any,
        tools: list[dict[str, Any]] | None = None,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        max_concurrency: int = 16,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"--chat-url {base_url!r}: expected an http(s) URL such as http://127.0.0.1:8000/v1")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.renderer, self.tools = model, renderer, tools
        self.end_of_turn_id = renderer.end_of_turn_id
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s, self.retries = timeout_s, retries
        self._limit = max_concurrency
        self._semaphores: dict[int, asyncio.Semaphore] = {}

    def close(self) -> None:
        """Nothing to release: each turn's HTTP client closes with it."""

    def request_body(self, request: SampleRequest) -> dict[str, Any]:
        """The JSON body for one turn."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(request.messages),
            "max_tokens": request.params.max_new_tokens,
            "temperature": request.params.temperature,
            "top_p": request.params.top_p,
        }
        if request.params.top_k > 0:
            body["top_k"] = request.params.top_k
        if request.seed is not None:
            body["seed"] = int(request.seed) & 0x7FFFFFFF
        if self.tools:
            body["tools"] = self.tools
        return body

    async def sample(self, request: SampleRequest) -> SampledTurn:
        """POST the conversation, return the reply as a turn (an empty ``"context"`` turn when the prompt is over the
        model's context); raises on other refusals, and after ``retries`` failed attempts."""
        import httpx

        loop_key = id(asyncio.get_running_loop())
        semaphore = self._semaphores.setdefault(loop_key, asyncio.Semaphore(self._limit))
        body = self.request_body(request)
        async with semaphore, httpx.AsyncClient(timeout=self.timeout_s) as client:
            for attempt in range(self.retries + 1):
                try:
                    response = await client.post(self.url, json=body, headers=self.headers)
                except httpx.TransportError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                else:
                    if response.status_code == 200:
                        break
                    status = response.status_code
                    error = f"HTTP {status}: {response.text[:300]}"
                    if is_context_overflow(status, response.text):  # no room for a reply: as a policy's overflow
                        return SampledTurn(token_ids=[], logprobs=[], finish_reason="context")
                    if status in _REFUSAL_FIXES:
                        raise PolicyConfigurationError(
                            f"chat endpoint {self.url} refused the request: {error}; {_REFUSAL_FIXES[status]}"
                        )
                    if status not in (408, 429) and status < 500:
                        raise RuntimeError(f"chat endpoint {self.url} refused the request: {error}")
                if attempt == self.retries:
                    raise RuntimeError(f"chat endpoint {self.url} failed {self.retries + 1} times: {error}")
                await asyncio.sleep(min(2.0**attempt, 30.0))
        choice = response.json()["choices"][0]
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return _text_turn(self.renderer, reply_text(choice.get("message") or {}), request, finish)
