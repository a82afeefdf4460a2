"""Code-v0's interactor, on the host: ``python3 interactor.py INPUT LOG``; INPUT is a JSON object with the prompt,
the test code and the entry point. Exit 0 = every assertion passed, 1 = failed, 3 = the tests are broken. Runs
after ``wire.py`` and a line ``MAX_REPLY_BYTES = ...``."""

# ruff: noqa: F821 -- wire_encode, wire_decode and MAX_REPLY_BYTES are defined by what agentgspo.envs.code prepends
import builtins
import json
import sys


class SolutionGone(BaseException):
    """The solution stopped answering (exit, crash, limit) or broke the protocol: never a passing outcome."""


def main(input_path, log_path):
    """Run the tests' ``check`` on a stand-in for the entry point that forwards each call to the solution; exit 0
    (passed), 1 (failed) or 3 (the tests do not load)."""
    spec = json.load(open(input_path))
    to_solution, from_solution = sys.stdout.buffer, sys.stdin.buffer
    sys.stdout = sys.stderr
    state = {"failure": None, "calls": 0}

    def fail(reason):
        state["failure"] = state["failure"] or reason
        raise SolutionGone(reason)

    def candidate(*args, **kwargs):
        if state["failure"]:
            raise SolutionGone(state["failure"])
        state["calls"] += 1
        try:
            request = {"args": wire_encode(list(args)), "kwargs": wire_encode(kwargs)}
            to_solution.write(json.dumps(request).encode() + b"\n")
            to_solution.flush()
        except (BrokenPipeError, OSError):
            fail("the solution exited before call %d" % state["calls"])
        line = from_solution.readline(MAX_REPLY_BYTES + 1)
        if not line.endswith(b"\n"):
            fail(
                "the solution stopped answering at call %d" % state["calls"]
                if len(line) <= MAX_REPLY_BYTES
                else "a return value larger than %d bytes" % MAX_REPLY_BYTES
            )
        try:
            reply = json.loads(line)
            if "return" in reply:
                return wire_decode(reply["return"])
            name, message = str(reply["raise"]), str(reply.get("message", ""))
        except Exception as exc:
            fail("malformed reply at call %d: %s" % (state["calls"], exc))
        error = getattr(builtins, name, None)
        try:
            exception = error(message) if isinstance(error, type) and issubclass(error, Exception) else None
        except Exception:
            exception = None
        raise exception or RuntimeError("%s: %s" % (name, message))

    namespace = {"__name__": "tests"}
    try:
        exec(compile(spec["prompt"], "prompt.py", "exec"), namespace)
        namespace[spec["entry_point"]] = candidate
        exec(compile(spec["tests"], "tests.py", "exec"), namespace)
        check = namespace["check"]
    except Exception as exc:
        print("judge error: the tests do not load: %s: %s" % (type(exc).__name__, exc), file=sys.stderr)
        sys.exit(3)
    try:
        check(candidate)
    except SolutionGone as exc:
        state["failure"] = state["failure"] or str(exc)
    except AssertionError:
        state["failure"] = "an assertion failed after %d calls" % state["calls"]
    except Exception as exc:
        state["failure"] = "%s after %d calls: %s" % (type(exc).__name__, state["calls"], str(exc)[:200])
    if state["failure"]:
        print(state["failure"], file=sys.stderr)
        sys.exit(1)
    print("all assertions passed (%d calls)" % state["calls"], file=sys.stderr)
    sys.exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
