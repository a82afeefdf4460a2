"""Runs inside the sandbox, after ``wire.py`` and the lines ``_PROGRAM = ...`` (prompt + solution) and
``_ENTRY = ...`` (the function's name): keep the protocol pipes, point the solution's stdio elsewhere, execute the
program, then answer call requests (JSON lines) until EOF."""

# ruff: noqa: F821 -- wire_encode, wire_decode, _PROGRAM and _ENTRY are defined by what agentgspo.envs.code prepends
import json
import os
import sys

_requests = os.fdopen(os.dup(0), "rb")
_replies = os.fdopen(os.dup(1), "wb")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
os.dup2(2, 1)
sys.stdin = open(os.devnull)
_namespace = {"__name__": "solution", "__builtins__": __builtins__}
_load_error = None
try:
    exec(compile(_PROGRAM, "solution.py", "exec"), _namespace)
except Exception as exc:
    _load_error = "%s: %s" % (type(exc).__name__, exc)
_entry = _namespace.get(_ENTRY)
del _namespace
for _line in _requests:
    try:
        if _load_error is not None:
            raise RuntimeError("the solution failed to load: " + _load_error)
        if not callable(_entry):
            raise NameError("the solution does not define %s" % _ENTRY)
        _request = json.loads(_line)
        _value = _entry(*wire_decode(_request["args"]), **wire_decode(_request["kwargs"]))
        _reply = {"return": wire_encode(_value)}
    except Exception as exc:
        _reply = {"raise": type(exc).__name__, "message": str(exc)[:300]}
    _replies.write(json.dumps(_reply).encode() + b"\n")
    _replies.flush()
