"""Support for the verifiers interop tests: where the fixtures live, and an env's oracle served as a model.

:class:`OracleServer` is a real OpenAI-compatible HTTP server on 127.0.0.1: ``POST /v1/chat/completions`` reads
the conversation as our chat messages, asks the env's ``oracle(messages)`` for the next turn and answers with it
as an assistant message, its ``<tool_call>`` blocks as OpenAI ``tool_calls`` (streamed or not, as asked). It keeps
every request it answered, for the tests to read what reached the model.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agentgspo.environments.interop.openai_chat import completion, completion_events, from_openai, to_openai_assistant

#: tests/interop/fixtures: vf_tool_quiz, a verifiers environment written with verifiers' public API.
FIXTURES = Path(__file__).resolve().parent / "fixtures"


class OracleServer:
    """``oracle(messages) -> str`` served at ``url`` (``http://127.0.0.1:PORT/v1``); a context manager."""

    def __init__(self, oracle: Callable[[list[dict]], str], model: str = "oracle"):
        self.oracle, self.model = oracle, model
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 -- http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, "application/json", b'{"error": {"message": "not found"}}')
                server.requests.append(body)
                messages = body["messages"]
                turn = sum(m["role"] == "assistant" for m in messages)
                answer = to_openai_assistant(server.oracle(from_openai(messages)), turn)
                payload = completion(answer.message, body.get("model", server.model))
                if body.get("stream"):
                    return self._send(200, "text/event-stream", completion_events(payload))
                return self._send(200, "application/json", json.dumps(payload).encode())

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # bound (and answering) once constructed
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="oracle-server")
        self._thread.start()

    def close(self) -> None:
        """Stop serving and join the server's thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> OracleServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
