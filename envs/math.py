"""`agentgspo/Math-v0`: math problems with a ``python`` tool; the final answer goes in ``\\boxed{}``.

The model may call ``python(code)`` (stdout and stderr of the program come back) as often as it likes; a turn
without tool calls is its final answer. Reward 1.0 when the content of the last ``\\boxed{...}`` of that turn is
mathematically equal to the gold answer according to Hugging Face's ``math-verify`` (``parse`` + ``verify``:
LaTeX and plain expressions, fractions vs decimals, sets, intervals, ...), else 0.0.

Data: ~30 built-in problems (``envs/data/math_builtin.jsonl``) so the env works offline, or any local
JSONL/JSON/Parquet/CSV file via ``data_files=`` (read with ``datasets``; fields ``problem`` and ``answer`` by
default, renamed with ``problem_field``/``answer_field``). Files are read once per process and validated row by row
at construction. ``reset(seed=s)`` poses problem ``s % len(dataset)`` (seeds enumerate the dataset), or
``options={"index": i}``.

Held-out split (``split=``, :mod:`agentgspo.envs.splits`): ``"all"`` (default) poses every row, ``"train"`` all but
the held-out rows, ``"test"`` only those. A row is held out when the SHA-256 of its problem text falls in the
lowest ``TEST_FRACTION`` (0.2) of hash values (each side keeps at least one row), so a row's side never changes
when rows are added. The training loop trains on ``"train"`` and evaluates on ``"test"``.

Why the verifier runs in a worker process: math-verify's own timeouts use ``signal.alarm``, which raises outside
the main thread, and envs are stepped from worker threads, so it is called with ``parsing_timeout=None`` and
``timeout_seconds=None``. Without a timeout a hostile answer such as ``\\boxed{9^{9^{9^9}}}`` makes sympy compute
forever inside C code that no signal can interrupt. So by default each check runs in one of a few long-lived worker
processes, killed (and replaced) when it overruns ``verify_timeout_s``; such an answer scores 0.0 with
``info["verify_timeout"] = True``. ``verify_timeout_s=None`` verifies in the calling thread (faster, unbounded).
"""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgspo.environments.env import Action, ChatEnv, Message
from agentgspo.envs.datafiles import builtin_path, load_rows, loaded_row_sets, task_index
from agentgspo.envs.splits import split_indices
from agentgspo.envs.tool_output import SANDBOX_MEMORY_LIMIT_MB, format_tool_output, sandboxed_run_output
from agentgspo.environments.tool_calls import ToolCall
from agentgspo.sandboxes import Limits, SandboxUnavailable, get_sandbox, run_python

__all__ = [
    "last_boxed",
    "verify_answer",
    "VerifierPool",
    "verifier_pool",
    "run_python_sandboxed",
    "run_python_subprocess",
    "math_oracle",
    "math_wrong",
    "MathEnv",
]

SYSTEM_PROMPT = (
    "Solve the problem. You may run Python with the python tool (print what you need to see). "
    "Put the final answer in \\boxed{}."
)
BUILTIN_DATA = "math_builtin.jsonl"
MATH_INSTALL_HINT = "Math-v0 verifies answers with math-verify: pip install 'agentgspo[math]' (or math-verify)"
WRONG_ANSWER = "-987654321"  # what the wrong policy answers; no built-in gold answer equals it


# ----------------------------------------------------------------------------------------------- answers


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in ``text`` (nested braces allowed), or ``None``.

    >>> last_boxed(r"so \\boxed{1} or rather \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    >>> last_boxed("no box") is None
    True
    """
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, begin = 0, start + len("\\boxed{")
    for i in range(begin, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            if depth == 0:
                return text[begin:i].strip()
            depth -= 1
    return None


def verify_answer(gold: str, answer: str) -> bool:
    """math-verify's verdict that ``answer`` (a boxed content) equals ``gold``, safe in any thread.

    Signal-based timeouts are off (``parsing_timeout=None``, ``timeout_seconds=None``): they only work in the main
    thread. This call is therefore unbounded; :class:`MathEnv` runs it in a killable worker process by default.
    """
    try:
        from math_verify import parse, verify
    except ImportError as exc:
        raise ImportError(MATH_INSTALL_HINT) from exc
    gold_parsed = parse(f"${gold}$", parsing_timeout=None)
    if not gold_parsed:
        raise ValueError(f"math-verify cannot parse the gold answer {gold!r}; fix the dataset row")
    answer_parsed = parse(f"\\boxed{{{answer}}}", parsing_timeout=None)
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=None))


def _worker_main() -> None:
    """Body of a verifier worker process: JSON lines ``{"gold", "answer"}`` in, ``{"correct"}`` out."""
    import logging

    logging.disable(logging.WARNING)  # math-verify warns once that its timeouts are off: we enforce our own
    try:
        verify_answer("1", "1")  # imports sympy and the LaTeX parser once, before the first timed request
    except Exception as exc:  # noqa: BLE001 -- reported to the parent, which raises it
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"correct": verify_answer(request["gold"], request["answer"])}
        except Exception as exc:  # noqa: BLE001 -- a verifier error must not be a silent 0
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), flush=True)


class _VerifierWorker:
    """One long-lived Python process running :func:`_worker_main`."""

    def __init__(self, startup_timeout_s: float = 120.0):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from agentgspo.envs.math import _worker_main; _worker_main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        reply = self._read(startup_timeout_s)
        if reply is None or "ready" not in reply:
            self.kill()
            detail = (reply or {}).get("error", "no reply")
            raise RuntimeError(f"the math-verify worker process did not start: {detail}. {MATH_INSTALL_HINT}")

    def _read(self, timeout_s: float) -> dict | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        return json.loads(line) if line else None

    def check(self, gold: str, answer: str, timeout_s: float) -> bool | None:
        """True/False, or ``None`` when it overran ``timeout_s`` (the process is then dead)."""
        self.proc.stdin.write(json.dumps({"gold": gold, "answer": answer}) + "\n")
        self.proc.stdin.flush()
        reply = self._read(timeout_s)
        if reply is None:
            self.kill()
            return None
        if "error" in reply:
            raise RuntimeError(f"math-verify failed on gold {gold!r}: {reply['error']}")
        return bool(reply["correct"])

    def kill(self) -> None:
        """Kill the process (and reap it)."""
        self.proc.kill()
        self.proc.wait()

    @property
    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc.poll() is None


class VerifierPool:
    """At most ``size`` verifier processes shared by all threads; a worker that overruns is killed and replaced."""

    def __init__(self, size: int):
        self._idle: queue.LifoQueue[_VerifierWorker | None] = queue.LifoQueue()
        for _ in range(size):
            self._idle.put(None)  # a slot; its process starts on first use

    def check(self, gold: str, answer: str, timeout_s: float) -> bool | None:
        """:meth:`_VerifierWorker.check` on a free worker (blocks while all are busy)."""
        worker = self._idle.get()
        try:
            if worker is None or not worker.alive:
                worker = _VerifierWorker()
            return worker.check(gold, answer, timeout_s)
        finally:
            self._idle.put(worker if worker is not None and worker.alive else None)


_pool: VerifierPool | None = None
_pool_lock = threading.Lock()


def verifier_pool() -> VerifierPool:
    """The process-wide verifier pool (``min(4, cpu_count)`` workers, started lazily)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = VerifierPool(min(4, os.cpu_count() or 1))
        return _pool


# ----------------------------------------------------------------------------------------------- python tool


def run_python_sandboxed(
    code: str, timeout_s: float = 5.0, max_output_chars: int = 4000, backend: str = "local"
) -> str:
    """Run ``code`` with ``agentgspo.sandboxes.run_python`` (bubblewrap by default); return stdout+stderr.

    The sandbox's threat model is in ``sandboxes/local.py`` (no network, no host files, limits on CPU, memory,
    processes and output). Raises ``RuntimeError`` when the sandbox itself fails (the model reads it as a tool
    error); the program's own failures (exceptions, time or memory limits) are output for the model.
    """
    limits = Limits(
        time_limit_s=timeout_s,
        wall_limit_s=timeout_s,
        memory_limit_mb=SANDBOX_MEMORY_LIMIT_MB,
        output_limit_mb=max_output_chars * 4 / 2**20,
    )
    result = run_python(code, limits=limits, backend=backend)
    return sandboxed_run_output(result, timeout_s, max_output_chars)


def run_python_subprocess(code: str, timeout_s: float = 5.0, max_output_chars: int = 4000) -> str:
    """Run ``code`` with ``python -I`` in a fresh temporary directory; return stdout+stderr (truncated).

    Threat model: this is NOT a sandbox (``MathEnv(sandbox="none")`` only). It bounds wall time (the process
    group is killed) and the output read, and hides the caller's environment variables, working directory and
    user site-packages; it does not stop the code from reading or writing the user's files, using the network,
    or exhausting memory. For trusted policies on machines without bubblewrap.
    """
    with tempfile.TemporaryDirectory(prefix="agentgspo-python-") as workdir:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", code],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": workdir},
            start_new_session=True,
        )
        box: dict[str, bytes] = {}
        reader = threading.Thread(target=lambda: box.update(out=proc.stdout.read(max_output_chars + 1)))
        reader.start()
        reader.join(timeout_s)
        timed_out = reader.is_alive()
        try:
            os.killpg(proc.pid, 9)  # the group: children of the code die too; also ends a blocked read
        except ProcessLookupError:
            pass
        reader.join()
        status = proc.wait()
        proc.stdout.close()
    text = box.get("out", b"").decode("utf-8", "replace")
    note = f"killed: the program ran longer than {timeout_s:g} s" if timed_out else ""
    if status != 0 and not text and not timed_out:
        note = f"exit status {status}, no output"
    return format_tool_output(text, max_output_chars, note)


# ----------------------------------------------------------------------------------------------- policies


def _gold_for(messages: list[Message]) -> str | None:
    """The gold answer of the posed problem, looked up in the files :func:`load_rows` has read (``None``: unknown)."""
    problem = next((m["content"] for m in messages if m["role"] == "user"), "")
    for fields, rows in loaded_row_sets():
        for row in rows:
            if row[fields[0]] == problem:
                return row[fields[1]]
    return None


def math_oracle(messages: list[Message]) -> str:
    """Expert turn: print the gold answer with the python tool, then box what the tool printed.

    The gold comes from the loaded datasets (looked up by the problem text), so this only works for problems of
    datasets loaded in this process; the python round trip exercises the tool in tests.
    """
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        code = f"print({_gold_for(messages)!r})"
        return ToolCall("python", {"code": code}).to_text()
    return f"The answer is \\boxed{{{results[-1].strip()}}}."


def math_wrong(messages: list[Message]) -> str:
    """A policy that boxes a wrong answer without using the tool."""
    return f"I guess \\boxed{{{WRONG_ANSWER}}}."


# ----------------------------------------------------------------------------------------------- env


def _python_runner(sandbox: str) -> Callable[[str, float, int], str]:
    """The python tool's runner for ``sandbox``; fails now, with the fix, when the sandbox cannot isolate here."""
    if sandbox == "none":
        return run_python_subprocess
    try:
        get_sandbox(sandbox)  # cached per process; the local backend probes bubblewrap once
    except (SandboxUnavailable, ValueError) as exc:
        raise SandboxUnavailable(
            f"Math-v0's python tool cannot use sandbox {sandbox!r}: {exc}. To run the "
            "model's code WITHOUT isolation (trusted policies only), "
            "pass sandbox='none'."
        ) from exc
    return lambda code, timeout_s, max_chars: run_python_sandboxed(code, timeout_s, max_chars, backend=sandbox)


class MathEnv(ChatEnv):
    """Math problems, a ``python`` tool, answers in ``\\boxed{}`` checked by math-verify (see module docstring).

    Args:
        data_files: a local .jsonl/.json/.parquet/.csv file; ``None`` uses the ~30 built-in problems.
        problem_field, answer_field: names of the problem and gold-answer fields (both strings in every row).
        python_timeout_s: wall-clock limit of one python call.
        max_output_chars: most characters of program output returned to the model.
        verify_timeout_s: limit of one math-verify check in a worker process; ``None`` checks in this thread.
        sandbox: where the tool's code runs: an ``agentgspo.sandboxes`` backend (``"local"`` bubblewrap,
            ``"docker"``, ``"remote"``), checked at construction; or ``"none"``: a plain subprocess, NOT isolated
            (:func:`run_python_subprocess`), for trusted policies on machines without bubblewrap.
        split: ``"all"`` rows, ``"train"`` (all but the held-out ones) or ``"test"`` (only the held-out ones; the
            rule is in the module docstring).
        **chat_env_kwargs: ``tool_error_policy``, ``tool_error_penalty``, ``max_parse_errors`` of :class:`ChatEnv`.
    """

    oracle = staticmethod(math_oracle)
    wrong = staticmethod(math_wrong)
    held_out_by = "split"  # a finite dataset: its `split` keyword holds rows out
    task_keywords = ("data_files", "problem_field", "answer_field")  # they choose the tasks

    def __init__(
        self,
        data_files: str | Path | None = None,
        *,
        problem_field: str = "problem",
        answer_field: str = "answer",
        python_timeout_s: float = 5.0,
        max_output_chars: int = 4000,
        verify_timeout_s: float | None = 5.0,
        sandbox: str = "local",
        split: str = "all",
        **chat_env_kwargs: Any,
    ):
        import importlib.util

        if importlib.util.find_spec("math_verify") is None:
            raise ImportError(MATH_INSTALL_HINT)
        if python_timeout_s <= 0 or (verify_timeout_s is not None and verify_timeout_s <= 0):
            raise ValueError(
                f"timeouts must be > 0, got python_timeout_s={python_timeout_s}, verify_timeout_s={verify_timeout_s}"
            )
        runner = _python_runner(sandbox)
        path = builtin_path(BUILTIN_DATA) if data_files is None else data_files
        rows = load_rows(path, (problem_field, answer_field))
        chosen = split_indices(
            rows, split, lambda row: row[problem_field], key_name=problem_field, what=f"the problems of {path}"
        )
        self.rows = rows if split == "all" else [rows[i] for i in chosen]
        self.problem_field, self.answer_field = problem_field, answer_field
        self.verify_timeout_s = verify_timeout_s

        def python(code: str) -> str:
            """Run a Python program and return what it prints (stdout and stderr).

            Args:
                code: the program; print() the values you want to see.
            """
            return runner(code, python_timeout_s, max_output_chars)

        super().__init__(tools=[python], **chat_env_kwargs)
        self.problem = ""
        self.answer = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Pose problem ``options["index"]``, else ``seed % len(rows)``, else a random one."""
        super().reset(seed=seed)
        index = task_index(seed, options, len(self.rows), self.np_random)
        row = self.rows[index]
        self.problem, self.answer = row[self.problem_field], row[self.answer_field]
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": self.problem}]
        return messages, {"index": index, "answer": self.answer}

    def respond(self, action: Action):
        """Score the last ``\\boxed{}`` of a turn without tool calls and end the episode."""
        boxed = last_boxed(action.content)
        info: dict[str, Any] = {"answered": boxed is not None, "correct": False}
        if boxed is not None:
            if self.verify_timeout_s is None:
                info["correct"] = verify_answer(self.answer, boxed)
            else:
                verdict = verifier_pool().check(self.answer, boxed, self.verify_timeout_s)
                info["verify_timeout"] = verdict is None
                info["correct"] = bool(verdict)
        return [], 1.0 if info["correct"] else 0.0, True, False, info
