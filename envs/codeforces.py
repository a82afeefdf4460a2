"""`agentgspo/CodeForces-v0`: a competitive-programming statement; run code, test on samples, submit to the judge.

Tools: ``run(code, stdin, lang)`` runs a program on custom input, ``run_samples(code, lang)`` judges it on the
statement's examples (showing input, expected and actual output: they are public), ``submit(code, lang)``
judges it on the hidden tests with the problem's checker, interactor, time and memory limits
(``agentgspo.sandboxes``). ``lang`` is ``"python"`` (CPython 3), ``"pypy3"`` (PyPy 3), ``"cpp"`` (C++17) or ``"c"``
(C17), as Codeforces offers them; on a Kattis package Python 3 runs under PyPy, as Kattis runs it
(``sandboxes.judge.problems.judged_language``), and each submission's record (``info["submissions"]``) names the
language that judged it (``lang``: ``python3``, ``pypy3``, ``cpp`` or ``c``). A submission's tool message is its
verdict with per-test verdicts, times and memory, never a hidden test's content nor the checker's message about
it. The episode ends at the first AC, when ``max_submissions`` are used, or at a turn without tool calls (its
last code block, if any and if submissions are left, is submitted first).

Score: 1.0 for AC; otherwise 0.0, or with ``partial_credit=True`` the best fraction of hidden tests passed by a
submission (judged without stopping at the first failure); minus ``compile_error_penalty`` per submission that did
not compile. It is paid as it is earned: each step's reward is what it added to the score (a submission's
partial-credit improvement, the rest up to 1.0 at AC, minus the penalty at a compile error), so the rewards so far
always sum to the score, whatever ends the episode (the runner's ``max_turns``, ``max_tokens``, env budget...). A judge
error (checker, interactor or sandbox failure) is never charged to the model: the submission does not count, the tool
message says so, ``info["judge_errors"]`` counts it, and after ``max_judge_errors`` the episode ends with
``stop_reason="judge_error"`` and the turn masked.

Problems (``data_files``, see :mod:`agentgspo.envs.codeforces_sources`): ``None`` the five starter problems
(``envs/data/codeforces_builtin.jsonl``: exact tokens, a float checker in open-r1 ``generated_checker`` form,
several test cases per input, an interactive one), ``"builtin"`` the project's problem set
(``envs/data/problemset/``), a problem folder in any registered format (the project's, an ICPC/Kattis or a Polygon
package: ``agentgspo.sandboxes.judge.formats``) or a folder of them,
or a .jsonl/.json/.parquet file of open-r1/codeforces, DeepMind code_contests or LiveCodeBench rows; read once per
process. Two optional fields extend the open-r1 schema: ``interactor`` (Python source of a testlib-style interactor,
``interactor INPUT LOG``, exit 0/1/2 = AC/WA/PE) makes an interactive row judgeable, and ``reference_solutions``
(``{"python": src, "cpp": src}``) feeds the oracle policy. Rows that cannot be judged here (interactive without an
interactor, LiveCodeBench functional tests) are skipped and counted (``problem_set.skipped``). Each task carries
``metadata`` (id, title, rating, tags, source) and the shipped ``references`` and ``wrong`` solutions.

Held-out split (``split=``, :mod:`agentgspo.envs.splits`): ``"all"`` (default: ``agentgspo eval`` and rollouts see
every problem) poses every problem, ``"train"`` all but the held-out ones, ``"test"`` only those. The held-out
problems are the ids listed in ``held_out`` (the codeforces recipe's ``--held-out``), else those whose id's
SHA-256 falls in the lowest ``TEST_FRACTION`` (0.2) of hash values (each side keeps at least one problem), so a
problem's side never changes when problems are added. ``exclude`` removes problems from every split. The training
loop trains on ``"train"`` and evaluates on ``"test"``.

Threat model: the judge's (``sandboxes/judge/core.py``, ``sandboxes/local.py``): solutions run in bubblewrap with
CPU, memory, output and process limits; hidden inputs are bound read-only and answers never enter the sandbox;
checkers and interactors are trusted jury code run on the host. This env adds: hidden test contents and checker
messages never reach the model (a solution that prints its input to stderr cannot leak it through the verdict),
so printing guessed outputs earns nothing beyond what the checker accepts; early exits are judged on the output
produced (empty output is WA/PE).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgspo.environments.env import Action, ChatEnv, Message, as_action
from agentgspo.envs.codeforces_sources import (
    CodeforcesTask,
    ProblemSet,
    format_statement,
    open_r1_task,
    read_problemset,
    read_tasks,
)
from agentgspo.envs.datafiles import LoadedOnce, builtin_path, resolved_path, task_index
from agentgspo.envs.splits import split_indices
from agentgspo.envs.tool_output import format_tool_output
from agentgspo.environments.tool_calls import ToolCall
from agentgspo.sandboxes import SandboxUnavailable, Verdict, get_sandbox, judge, judge_problem
from agentgspo.sandboxes.judge.languages import normalize_language
from agentgspo.sandboxes.judge.problems import judged_language

SYSTEM_PROMPT = (
    "Solve the competitive-programming problem in Python 3 (CPython or PyPy), C++17 or C. Tools: run (your program "
    "on custom input), run_samples (on the statement's examples) and submit (judged on hidden tests; limited "
    "submissions). "
    "The episode ends at an accepted submission."
)
BUILTIN_DATA = "codeforces_builtin.jsonl"
BUILTIN_SET = "builtin"  # the project's problem set, envs/data/problemset/
__all__ = ["CodeforcesEnv", "CodeforcesTask", "ProblemSet", "format_statement", "load_problem_set", "task_from_row"]
LANG_HELP = "'python' (CPython 3), 'pypy3' (PyPy 3), 'cpp' (C++17) or 'c' (C17)"
_CODE_BLOCK = re.compile(r"```(python3|python|pypy3|pypy|py|cpp|c\+\+|c)?[ \t]*\n(.*?)```", re.DOTALL)


_problem_sets: LoadedOnce[str, ProblemSet] = LoadedOnce()


def task_from_row(row: Any, where: str) -> CodeforcesTask | None:
    """A task from one open-r1/codeforces row; ``None`` for a row that cannot be judged here (an interactive row
    without an interactor, a row without official tests).

    Raises ``ValueError`` naming ``where`` (file and row) for rows that are not valid.
    """
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected an object in the open-r1/codeforces schema, got {type(row).__name__}")
    try:
        return open_r1_task(row)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def load_problem_set(path: str | Path | None = None) -> ProblemSet:
    """The tasks of a source (see :mod:`agentgspo.envs.codeforces_sources`): ``None`` the five starter problems,
    ``"builtin"`` the project's problem set, else a rows file or a problem folder. Read once per process, cached by
    resolved path (thread-safe). Errors name the path or the row."""
    if path is not None and str(path) == BUILTIN_SET:
        return _problem_sets.get(BUILTIN_SET, _read_builtin_set)
    path = builtin_path(BUILTIN_DATA) if path is None else resolved_path(path)
    return _problem_sets.get(str(path), lambda: read_tasks(path))


def _read_builtin_set() -> ProblemSet:
    """The project's problem set (``envs/data/problemset``) as tasks, hidden tests materialised."""
    return read_problemset()


def tasks_without(
    tasks: list[CodeforcesTask], exclude: Sequence[str], data_files: str | Path | None
) -> list[CodeforcesTask]:
    """``tasks`` but those whose id is in ``exclude``; unknown ids and excluding every task are errors."""
    if isinstance(exclude, str):
        raise ValueError(f"exclude: expected a list of problem ids, got the string {exclude!r}")
    if not exclude:
        return tasks  # the problem set's own list: loaded once per process, shared
    ids = [task.metadata["id"] for task in tasks]
    for name in exclude:
        if name not in ids:
            close = difflib.get_close_matches(str(name), ids, n=3)
            hint = f"; close ones: {', '.join(close)}" if close else f"; ids are e.g. {', '.join(ids[:5])}"
            raise ValueError(f"exclude: no problem {name!r} in data_files={data_files!r}{hint}")
    kept = [task for task in tasks if task.metadata["id"] not in set(exclude)]
    if not kept:
        raise ValueError(f"exclude: leaves none of the {len(tasks)} problems of data_files={data_files!r}")
    return kept


def tasks_in_split(
    tasks: list[CodeforcesTask],
    split: str,
    held_out: Sequence[str] | None,
    exclude: Sequence[str],
    data_files: str | Path | None,
) -> list[CodeforcesTask]:
    """The ``tasks`` of ``split`` (held out: the ``held_out`` ids, else by hash of the id) but the ``exclude``
    ones; a split left empty by ``exclude`` is an error."""
    kept = tasks_without(tasks, exclude, data_files)
    chosen = split_indices(
        tasks,
        split,
        lambda task: task.metadata["id"],
        key_name="id",
        held_out=held_out,
        what=f"the problems of data_files={data_files!r}",
    )
    if split == "all":
        return kept
    ids = {task.metadata["id"] for task in kept}
    in_split = [tasks[i] for i in chosen if tasks[i].metadata["id"] in ids]
    if not in_split:
        raise ValueError(f"exclude: leaves none of the {len(chosen)} problems of split {split!r}; exclude fewer")
    return in_split


def judge_language(lang: str) -> str:
    """The judge's language name (``sandboxes.judge.languages``) for a tool's ``lang``; ValueError lists the
    accepted names."""
    try:
        return normalize_language(lang)
    except ValueError:
        raise ValueError(f"unknown lang {lang!r}; use {LANG_HELP}") from None


def _last_code_block(text: str) -> tuple[str, str] | None:
    blocks = _CODE_BLOCK.findall(text)
    if not blocks:
        return None
    lang, code = blocks[-1]
    return lang or "python", code


# ----------------------------------------------------------------------------------------------- policies


def _task_for(messages: list[Message]) -> CodeforcesTask | None:
    """The posed task, looked up by its statement in the problem sets loaded so far (``None``: unknown)."""
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    for problem_set in _problem_sets.values():
        for task in problem_set.tasks:
            if task.statement == user:
                return task
    return None


def _call(name: str, **arguments: str) -> str:
    return ToolCall(name, arguments).to_text()


def codeforces_oracle(messages: list[Message]) -> str:
    """Expert turns: run the reference solution on the samples, then submit it (Python, else C++)."""
    task = _task_for(messages)
    lang = "py" if task is None or "py" in task.references else "cpp"
    code = task.references.get(lang, "") if task else ""
    lang_name = "python" if lang == "py" else "cpp"
    if not any(m["role"] == "tool" for m in messages):
        return "Checking the examples first.\n" + _call("run_samples", code=code, lang=lang_name)
    return "Submitting.\n" + _call("submit", code=code, lang=lang_name)


def codeforces_wrong(messages: list[Message]) -> str:
    """A policy that submits a program printing 0 until its submissions run out."""
    return _call("submit", code="print(0)", lang="python")


# ----------------------------------------------------------------------------------------------- env


class CodeforcesEnv(ChatEnv):
    """Competitive programming with run / run_samples / submit tools (see the module docstring).

    Args:
        data_files: ``None`` (the 5 starter problems), ``"builtin"`` (the project's problem set), a problem folder
            or a .jsonl/.json/.parquet rows file (see the module docstring).
        max_submissions: submissions per episode (AC or this many end the episode).
        partial_credit: reward the best fraction of hidden tests passed when nothing was accepted.
        compile_error_penalty: subtracted from the reward per submission that did not compile.
        max_judge_errors: judge errors (not the model's fault, not counted as submissions) before the episode
            ends with ``stop_reason="judge_error"``.
        run_time_limit_s: CPU limit of a ``run`` call.
        time_limit_scale: submissions are judged under the problem's time limit times this (0.5 judges as a
            machine twice as slow would, 2 as one twice as fast: ``agentgspo eval --time-limit-scale``).
        max_output_chars: most characters of program output in a tool message.
        sandbox: ``agentgspo.sandboxes`` backend (``"local"`` bubblewrap, ``"docker"``, ``"remote"``).
        exclude: ids of problems this env never poses, in any split; an unknown id is an error naming the close
            ones.
        split: ``"all"`` problems, ``"train"`` (all but the held-out ones) or ``"test"`` (only the held-out ones).
        held_out: ids of the held-out problems (e.g. the codeforces recipe's ``--held-out``); ``None``: the hash
            rule of the module docstring. An unknown id is an error naming the close ones.
        **chat_env_kwargs: ``tool_error_policy``, ``tool_error_penalty``, ``max_parse_errors`` of :class:`ChatEnv`.
    """

    oracle = staticmethod(codeforces_oracle)
    wrong = staticmethod(codeforces_wrong)
    held_out_by = "split"  # a finite problem list: its `split` keyword holds problems out
    task_keywords = ("data_files", "exclude", "held_out")  # they choose the tasks

    def __init__(
        self,
        data_files: str | Path | None = None,
        *,
        max_submissions: int = 3,
        partial_credit: bool = False,
        compile_error_penalty: float = 0.0,
        max_judge_errors: int = 3,
        run_time_limit_s: float = 5.0,
        time_limit_scale: float = 1.0,
        max_output_chars: int = 4000,
        sandbox: str = "local",
        exclude: Sequence[str] = (),
        split: str = "all",
        held_out: Sequence[str] | None = None,
        **chat_env_kwargs: Any,
    ):
        if max_submissions < 1 or max_judge_errors < 1:
            raise ValueError(
                f"max_submissions and max_judge_errors: expected >= 1, got {max_submissions}, {max_judge_errors}"
            )
        if compile_error_penalty < 0 or run_time_limit_s <= 0:
            raise ValueError(
                f"expected compile_error_penalty >= 0 and run_time_limit_s > 0, got "
                f"{compile_error_penalty}, {run_time_limit_s}"
            )
        if not (math.isfinite(time_limit_scale) and time_limit_scale > 0):
            raise ValueError(f"time_limit_scale: expected a finite number > 0, got {time_limit_scale!r}")
        try:
            get_sandbox(sandbox)
        except (SandboxUnavailable, ValueError) as exc:
            raise SandboxUnavailable(f"CodeForces-v0 cannot use sandbox {sandbox!r}: {exc}") from exc
        self.problem_set = load_problem_set(data_files)
        self.tasks = tasks_in_split(self.problem_set.tasks, split, held_out, exclude, data_files)
        self.max_submissions, self.partial_credit = max_submissions, partial_credit
        self.compile_error_penalty, self.max_judge_errors = float(compile_error_penalty), max_judge_errors
        self.run_time_limit_s, self.max_output_chars, self.sandbox = run_time_limit_s, max_output_chars, sandbox
        self.time_limit_scale = float(time_limit_scale)
        super().__init__(tools=[self.run, self.run_samples, self.submit], **chat_env_kwargs)
        self.task: CodeforcesTask | None = None
        self._clear()

    def _clear(self) -> None:
        self.submissions: list[dict[str, Any]] = []
        self.judge_errors = 0
        self.accepted = False
        self.paid = 0.0  # reward returned by the steps so far: the score when the last step returned

    # ------------------------------------------------------------------------------------------- tools

    def run(self, code: str, stdin: str = "", lang: str = "python") -> str:
        """Run your program on custom input and return its output (or how it failed).

        Args:
            code: the complete program (Python 3, C++17 or C).
            stdin: the input fed to the program.
            lang: "python" (CPython 3), "pypy3" (PyPy 3), "cpp" (C++17) or "c" (C17).
        """
        problem = self.task.problem
        limits = problem.limits(time_limit_s=self.run_time_limit_s)
        result = judge(
            code,
            [(stdin, "")],
            lang=self._language(lang),
            checker="capture",  # the output itself, on any backend
            limits=limits,
            io_mode=problem.io_mode,
            backend=self.sandbox,
        )
        if result.verdict == Verdict.CE:
            return "Compilation error:\n" + format_tool_output(result.compile_output, self.max_output_chars)
        if result.verdict == Verdict.JE:
            raise RuntimeError(f"the sandbox failed: {result.message or result.tests[0].message}")
        test = result.tests[0]
        if test.verdict == Verdict.AC:
            note = f"{test.time_s:.2f} s, {test.memory_mb:.0f} MB"
        else:
            note = f"{test.verdict.value} after {test.time_s:.2f} s"
        return format_tool_output(test.message, self.max_output_chars, note)

    def run_samples(self, code: str, lang: str = "python") -> str:
        """Judge your program on the statement's examples; shows input, expected and actual output of each.

        Args:
            code: the complete program (Python 3, C++17 or C).
            lang: "python" (CPython 3), "pypy3" (PyPy 3), "cpp" (C++17) or "c" (C17).
        """
        problem = self.task.problem
        if not problem.samples:
            return "This problem has no examples; use run with your own input."
        checker = None if problem.interactor else f"capture:{problem.checker or 'tokens'}"  # the verdict and output
        result = judge(
            code,
            problem.samples,
            lang=self._language(lang),
            checker=checker,
            interactor=problem.interactor,
            limits=problem.limits(),
            io_mode=problem.io_mode,
            backend=self.sandbox,
        )
        if result.verdict.value == "CE":
            return "Compilation error:\n" + format_tool_output(result.compile_output, self.max_output_chars)
        lines = [f"Examples: {result.verdict.value} ({result.passed}/{len(problem.samples)} passed)"]
        for sample, test in zip(problem.samples, result.tests):
            lines.append(f"Example {test.name}: {test.verdict.value}, {test.time_s:.2f} s")
            if test.verdict.value != "AC":
                shown = "" if problem.interactor else test.message
                lines.append(f"input:\n{sample.input.decode()}\nexpected:\n{sample.answer.decode()}\ngot:\n{shown}")
        return format_tool_output("\n".join(lines), self.max_output_chars)

    def submit(self, code: str, lang: str = "python") -> str:
        """Submit your program: it is judged on the hidden tests (limited submissions; AC ends the episode).

        Args:
            code: the complete program (Python 3, C++17 or C).
            lang: "python" (CPython 3), "pypy3" (PyPy 3), "cpp" (C++17) or "c" (C17).
        """
        if self.accepted:
            return "Already accepted; the episode is over."
        if len(self.submissions) >= self.max_submissions:
            return f"No submissions left (limit {self.max_submissions})."
        return self._judge_submission(code, judge_language(lang))

    def _language(self, lang: str) -> str:
        """The language a ``lang`` program is run and judged in on the posed problem (a Kattis package: Python 3
        under PyPy, as its submissions are judged)."""
        return judged_language(self.task.problem, judge_language(lang))

    def _judge_submission(self, code: str, lang: str) -> str:
        problem = self.task.problem
        lang = self._language(lang)  # the language that judges it, recorded with the verdict
        result = judge_problem(
            problem,
            code,
            lang,
            backend=self.sandbox,
            stop_on_failure=not self.partial_credit,
            time_limit_scale=self.time_limit_scale,
        )
        verdict = result.verdict.value
        if verdict == "JE":
            self.judge_errors += 1
            return "Judge error (not your fault); this submission does not count. Try again."
        total = len(problem.tests)
        self.submissions.append(
            {
                "verdict": verdict,
                "passed": result.passed,
                "total": total,
                "lang": lang,
                "compile_cache": result.compile_cache,  # hit, miss or off: counted by the eval summary
            }
        )
        self.accepted = verdict == "AC"
        left = self.max_submissions - len(self.submissions)
        if verdict == "CE":
            return f"Submission {len(self.submissions)}: Compilation error ({left} left):\n" + format_tool_output(
                result.compile_output, self.max_output_chars
            )
        # Per-test verdict, time and memory only: the tests' contents and checker messages stay hidden.
        lines = [
            f"Submission {len(self.submissions)}: {verdict} ({result.passed}/{total} tests passed"
            + ("" if self.accepted else f"; {left} submissions left")
            + ")"
        ]
        lines += [
            f"test {i}: {t.verdict.value} {t.time_s:.2f} s {t.memory_mb:.0f} MB"
            for i, t in enumerate(result.tests, start=1)
            if t.verdict.value != "SKIPPED"
        ]
        return "\n".join(lines)

    # ------------------------------------------------------------------------------------------- episode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Pose problem ``options["index"]``, else ``seed % len(tasks)``, else a random one."""
        super().reset(seed=seed)
        index = task_index(seed, options, len(self.tasks), self.np_random)
        self.task = self.tasks[index]
        self._clear()
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": self.task.statement}]
        return messages, {"index": index, "problem": self.task.problem.name}

    def score(self) -> float:
        """The episode's score so far (see the module docstring)."""
        if self.accepted:
            reward = 1.0
        elif self.partial_credit:
            reward = max((s["passed"] / s["total"] for s in self.submissions if s["total"]), default=0.0)
        else:
            reward = 0.0
        return reward - self.compile_error_penalty * sum(s["verdict"] == "CE" for s in self.submissions)

    def _earned(self) -> float:
        """What the score gained since the last step returned (paid now, so the rewards sum to the score)."""
        score = self.score()
        earned, self.paid = score - self.paid, score
        return earned

    def _info(self) -> dict[str, Any]:
        return {
            "submissions": [dict(s) for s in self.submissions],
            "accepted": self.accepted,
            "judge_errors": self.judge_errors,
        }

    def step(self, action: Action | str):
        """Run the tools and pay what they earned; end the episode at AC, no submissions left, judge errors or
        ``max_parse_errors``."""
        action = as_action(action)
        messages, reward, terminated, truncated, info = super().step(action)
        if not action.tool_calls and not action.parse_errors:
            return messages, reward, terminated, truncated, info  # respond() ended the episode
        info.update(self._info())
        reward += self._earned()
        if self.judge_errors >= self.max_judge_errors:
            info.update(stop_reason="judge_error", mask_turn=True)
            return messages, reward, True, truncated, info
        if terminated or self.accepted or len(self.submissions) >= self.max_submissions:  # also max_parse_errors
            return messages, reward, True, truncated, info
        return messages, reward, terminated, truncated, info

    def respond(self, action: Action):
        """A turn without tool calls ends the episode; its last code block is submitted if submissions are left."""
        block = _last_code_block(action.content)
        judge_errors = self.judge_errors
        if block is not None and not self.accepted and len(self.submissions) < self.max_submissions:
            self._judge_submission(block[1], judge_language(block[0]))
        info = self._info()
        if self.judge_errors > judge_errors:  # the final submission could not be judged: recorded, masked
            info.update(stop_reason="judge_error", mask_turn=True)
        return [], self._earned(), True, False, info
