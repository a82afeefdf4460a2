"""The judge: compile once, run every test of a submission in one sandbox, decide verdicts outside it.

The solution's box receives the source and the test inputs only; answers stay in this process, where the checker
compares them with the captured outputs. See ``sandboxes/__init__.py`` for the public API.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..protocol import Sandbox, Session
from ..registry import get_sandbox
from ..results import ExecResult, JudgeResult, Limits, TestResult, Verdict
from ..submission import TestCase
from .checkers import Checker, make_checker, program_argv, python_crashed
from . import compile_cache
from .compile import compile_command, host_pch_dir, source_name
from .languages import Language, get_language, normalize_language
from .testlib import compile_testlib_program, is_cpp_source, testlib_outcome

__all__ = [
    "classify_run",
    "missing_tool",
    "usable_cpus",
    "batch_workers",
    "overall_verdict",
    "judge",
    "run_python",
    "exec_result",
]

BINARY = "solution"
RUNNER_KILLED = "the solution ended the judge's runner (killed its parent process)"
# PyPy's own: its fatal "using too much memory, aborting" and a JIT that could not map its code area.
MEMORY_ERROR_MARKERS = (
    "MemoryError",
    "std::bad_alloc",
    "Cannot allocate memory",
    "out of memory",
    "using too much memory",
    "allocate some memory for the JIT",
)
_active_lock = threading.Lock()
_active_batches = 0  # submissions this process is running tests of right now (they share the CPUs)
# Interactive tests mostly wait (the solution and the interactor take turns), so more of them than CPUs run at once.
# Verdicts do not change with the load: limits are CPU time, a solution starved of CPU gets the wall extension, and
# solutions run at nice 19 below the interactors.
INTERACTIVE_TESTS_PER_CPU = 4


def classify_run(event: dict, limits: Limits, interactive: bool = False) -> Verdict | None:
    """The verdict a run earns on its own (TLE, ILE, OLE, MLE, RE), or None when its output must be checked.

    Order: output limit, time (CPU, then the wall guard: ILE for an interactive solution that idled), memory,
    runtime error. MLE is a failed run that hit the address-space limit (allocation error or peak near the limit)
    or a peak above the limit. A C++ program's static image (``image_kb``: code, data, bss) counts as a peak: a
    global array beyond the limit makes exec fail (SIGSEGV, or the loader cannot map the libraries), which is MLE.
    """
    output_bytes = int(limits.output_limit_mb * 1024 * 1024)
    sig = event.get("signal")
    if event.get("stdout_bytes", 0) > output_bytes or sig == signal.SIGXFSZ:
        return Verdict.OLE
    cpu = float(event.get("cpu_s", 0.0))
    if cpu > limits.time_limit_s or sig in (signal.SIGXCPU, signal.SIGPROF):
        return Verdict.TLE
    if event.get("wall_timeout"):
        return Verdict.ILE if interactive else Verdict.TLE
    memory_mb = max(event.get("memory_kb", 0), event.get("image_kb", 0)) / 1024
    failed = event.get("exit_code") != 0
    if interactive and sig == signal.SIGPIPE:
        return None  # the interactor hung up first: its verdict decides
    stderr = event.get("stderr", "")
    if failed and (memory_mb >= 0.9 * limits.memory_limit_mb or any(m in stderr for m in MEMORY_ERROR_MARKERS)):
        return Verdict.MLE
    if memory_mb > limits.memory_limit_mb:
        return Verdict.MLE
    if failed:
        return Verdict.RE
    return None


def _run_message(event: dict, verdict: Verdict) -> str:
    if verdict == Verdict.RE:
        how = f"signal {event['signal']}" if event.get("signal") else f"exit code {event.get('exit_code')}"
        return f"{how}: {event.get('stderr', '')[-500:]}".strip()
    if verdict == Verdict.ILE and event.get("deadlock"):
        return (
            f"deadlock: the solution and the interactor both waited for input (cpu {event.get('cpu_s', 0):.3f} s, "
            f"wall {event.get('wall_s', 0):.3f} s); does the solution flush its output after each query?"
        )
    if verdict in (Verdict.TLE, Verdict.ILE):
        return f"cpu {event.get('cpu_s', 0):.3f} s, wall {event.get('wall_s', 0):.3f} s"
    if verdict == Verdict.MLE:
        big_image = event.get("image_kb", 0) > event.get("memory_kb", 0)  # the static image explains the MLE
        image = f", static image {event['image_kb'] / 1024:.1f} MB" if big_image else ""
        return f"peak {event.get('memory_kb', 0) / 1024:.1f} MB{image}: {event.get('stderr', '')[-300:]}".strip()
    if verdict == Verdict.OLE:
        return f"output of {event.get('stdout_bytes', 0)} bytes or more"
    return ""


def _test_result(name: str, event: dict, verdict: Verdict, message: str = "", score: float | None = None) -> TestResult:
    return TestResult(
        name=name,
        verdict=verdict,
        time_s=round(float(event.get("cpu_s", 0.0)), 4),
        wall_time_s=round(float(event.get("wall_s", 0.0)), 4),
        memory_mb=round(event.get("memory_kb", 0) / 1024, 2),
        exit_code=event.get("exit_code"),
        signal=event.get("signal"),
        message=message or _run_message(event, verdict),
        score=score,
    )


def _error_of(events: list[dict]) -> str | None:
    for event in events:
        if event.get("event") == "error":
            return event.get("message", "sandbox error")
    return None


def _solution_broke_the_box(events: list[dict], box: Session, limits: Limits) -> bool:
    """The runner died mid-run (no ``done``) and a trivial program still runs in the same box: the solution ended
    its runner (killed its parent), which is its own runtime error, not the judge's failure."""
    if any(event.get("event") == "done" for event in events):
        return False
    try:
        probe = box.call(_run_spec("pass\n", "python3", box, limits, "stdio", "run"), [b""])
    except Exception:
        return False
    return _error_of(probe) is None and any(e.get("event") == "test" and e.get("exit_code") == 0 for e in probe)


@dataclass
class Compiled:
    """The compile step's outcome: ``ok`` (False: CE, with the compiler's ``output``), ``seconds`` (wall), ``error``
    (the step could not run: JE) and ``cache`` ("hit", "miss" or "off": ``compile_cache.py``)."""

    ok: bool
    output: str = ""
    seconds: float = 0.0
    error: str | None = None
    cache: str = "off"


def _compile(box: Session, source: str, lang: str, limits: Limits) -> Compiled:
    """Every language but CPython: its compile step inside the box (C, C++: the compiler; PyPy: a syntax check
    that writes the launcher), through the compile cache (``compile_cache.py``): a program compiled before from the
    same source with the same toolchain, flags and runner is placed in the box instead of compiled again."""
    language = get_language(lang)
    if language.in_runner:
        return Compiled(True)
    binary = f"{box.bin_dir}/{BINARY}"
    # An interpreted source is read at each run: it stays in the session's bin dir (so does any source unisolated)
    keep = language.interpreted or not box.isolated
    source_path = f"{box.bin_dir}/{source_name(lang)}" if keep else f"/tmp/w/{source_name(lang)}"
    spec = {
        "mode": "compile",
        "lang": language.name,
        "source": source,
        "make_dirs": [box.bin_dir],
        "source_path": source_path,
        "binary": binary,
        "compile_cmd": compile_command(lang, source_path, binary, box.pch_dir, limits.memory_limit_mb),
        "compile_limits": {
            "cpu_s": limits.compile_time_limit_s,
            "wall_s": limits.compile_time_limit_s * 1.5,
            "memory_mb": limits.compile_memory_mb,
        },
    }
    cache = compile_cache.open_cache() if source.strip() else None
    toolchain = compile_cache.toolchain_identity(box, language.compiler[0]) if cache is not None else None
    key = ""
    if toolchain is not None:
        # The session's binary directory is the one part of the argv that differs between boxes (unisolated).
        argv = [arg.replace(box.bin_dir, "{bin}") for arg in spec["compile_cmd"]]
        key = compile_cache.compile_key(source, language.name, toolchain, argv)

    def compile_in_box(keep_program: bool) -> tuple[Compiled, compile_cache.Entry | None]:
        wanted = dict(spec, return_program=cache.max_entry_bytes) if keep_program and cache is not None else spec
        events = box.call(wanted)
        for event in events:
            if event.get("event") == "compile":
                outcome = Compiled(bool(event["ok"]), event.get("stderr", ""), float(event.get("wall_s", 0.0)))
                program = base64.b64decode(event.get("program_b64", ""))
                entry = compile_cache.Entry(program, outcome.output) if outcome.ok and program else None
                return outcome, entry
        return Compiled(False, error=_error_of(events) or "compiler did not report"), None

    def place_in_box(entry: compile_cache.Entry) -> Compiled:
        events = box.call(dict(spec, program=entry.program))
        for event in events:
            if event.get("event") == "compile" and event.get("ok"):
                return Compiled(True, entry.output, float(event.get("wall_s", 0.0)))
        return Compiled(False, error=_error_of(events) or "the cached program could not be placed in the sandbox")

    outcome, state = compile_cache.compile_cached(cache if key else None, key, compile_in_box, place_in_box)
    outcome.cache = state
    return outcome


def _run_spec(source: str, lang: str, box: Session, limits: Limits, io_mode: str, mode: str) -> dict:
    """The runner's spec for the tests of a ``lang`` program: CPython's source runs in the runner ("py"), every
    other language's compiled program (or launcher) is executed. PyPy's address space is the memory limit plus its
    reservations (``Language.extra_address_space_mb``): the limit is then enforced on the peak RSS (classify_run)
    and by PYPY_GC_MAX, as a judge limiting memory with a cgroup counts it, not by RLIMIT_AS."""
    language = get_language(lang)
    runner_limits = limits.runner_limits()
    runner_limits["memory_mb"] += language.extra_address_space_mb
    spec = {"mode": mode, "lang": "py" if language.in_runner else language.name, "limits": runner_limits}
    spec["io_mode"] = io_mode
    if language.in_runner:
        spec["source"] = source
    else:
        spec["binary"] = f"{box.bin_dir}/{BINARY}"
    return spec


def missing_tool(language: Language, sandbox: Sandbox) -> str | None:
    """Why the local backend cannot run ``language`` here (its compiler or interpreter is not installed; the box
    binds this machine's /usr), else None. That is the judge's failure (JE), never the solution's CE. The Docker
    image has them all (``.ci/setup_sandboxes.sh``); a remote server checks its own."""
    if not language.compiler or getattr(sandbox, "name", "") != "local":
        return None
    tool = language.compiler[0]
    if shutil.which(tool, path="/usr/bin:/bin") is not None:
        return None
    return (
        f"{language.name} ({language.title}) needs {tool}, which is not installed on this machine: run "
        f"`sudo bash .ci/setup_sandboxes.sh` (or `sudo apt-get install {os.path.basename(tool)}`)"
    )


def _compile_error_of(events: list[dict]) -> str | None:
    for event in events:
        if event.get("event") == "compile" and not event.get("ok"):
            return event.get("stderr", "")
    return None


def _rejected(status: int) -> bool:
    """An interactor exit that ends the test at once (``stop_when`` of the backends' interact): any but 0 (accepted;
    the solution may still fail on its own) or testlib's points / partial scores."""
    return status != 0 and not (status == 7 or 16 <= status <= 255)


def _interact_one(
    box: Session, spec: dict, case: TestCase, interactor: str, limits: Limits, transcript_checker: Checker | None
) -> TestResult:
    """One interactive test: the solution in the box, the interactor (trusted) here as ``interactor INPUT LOG
    ANSWER``, stdin/stdout cross-piped; a rejection stops the solution at once."""
    with tempfile.TemporaryDirectory(prefix="agentgspo-interact-") as tmp:
        input_path, log_path, answer_path = (os.path.join(tmp, name) for name in ("input", "log", "answer"))
        Path(input_path).write_bytes(case.input)
        Path(answer_path).write_bytes(case.answer)
        peer_holder: list[subprocess.Popen] = []
        with open(os.path.join(tmp, "interactor.err"), "w+b") as err_file:

            def start(stdin_fd: int, stdout_fd: int) -> subprocess.Popen:
                peer_holder.append(
                    subprocess.Popen(
                        program_argv(interactor) + [input_path, log_path, answer_path],
                        stdin=stdin_fd,
                        stdout=stdout_fd,
                        stderr=err_file,
                        start_new_session=True,
                    )
                )
                return peer_holder[-1]

            events = box.interact(spec, start, stop_when=_rejected)
            peer_code, peer_msg, peer_crashed = None, "", False
            if peer_holder:
                try:
                    peer_code = peer_holder[0].wait(timeout=limits.wall_s + 5)
                except subprocess.TimeoutExpired:
                    os.killpg(peer_holder[0].pid, signal.SIGKILL)
                    peer_holder[0].wait()
                    peer_msg = "interactor did not exit after the solution ended"
                err_file.seek(max(0, os.fstat(err_file.fileno()).st_size - 16384))
                tail = err_file.read()
                peer_msg = (peer_msg or tail.decode("utf-8", "replace")).strip()[-2000:]
                if python_crashed(interactor, peer_code, tail):
                    peer_crashed, peer_msg = True, tail.decode("utf-8", "replace").strip()[-500:]
        result = _interactive_verdict(case.name, events, peer_code, peer_msg, limits, peer_crashed)
        if result.verdict == Verdict.AC and transcript_checker is not None:
            verdict, message, *scored = transcript_checker.check(
                case.input, Path(log_path).read_bytes() if os.path.exists(log_path) else b"", case.answer
            )
            result.verdict, result.message = verdict, message
            result.score = scored[0] if scored else result.score
    # Only a runner that got as far as starting the solution (its "started" event) can have been ended by it: a box
    # that never started (bwrap could not fork, the exec failed) stays the judge's failure even if a probe runs now.
    if (
        result.verdict == Verdict.JE
        and peer_holder
        and _error_of(events) is not None
        and any(event.get("event") == "started" for event in events)
        and _solution_broke_the_box(events, box, limits)
    ):
        result = TestResult(case.name, Verdict.RE, message=f"{RUNNER_KILLED}: {_error_of(events)}")
    return result


def _judge_interactive(
    box: Session,
    source: str,
    lang: str,
    cases: list[TestCase],
    interactor: str,
    limits: Limits,
    stop_on_failure: bool,
    transcript_checker: Checker | None = None,
    workers: int | None = None,
) -> list[TestResult]:
    """Every test as ``_interact_one``, several at once (``workers``, default INTERACTIVE_TESTS_PER_CPU per usable
    CPU shared among concurrent submissions, capped as batch tests are by ``batch_workers``); results in test order.
    With stop_on_failure, no test starts after a failure is known, and results end at the first failure."""
    spec = _run_spec(source, lang, box, limits, "stdio", "interact")
    stop = threading.Event()

    def run(case: TestCase) -> TestResult | None:
        if stop.is_set():
            return None
        result = _interact_one(box, spec, case, interactor, limits, transcript_checker)
        if stop_on_failure and result.verdict != Verdict.AC:
            stop.set()
        return result

    with _batch_slot() as concurrent:
        default = max(1, INTERACTIVE_TESTS_PER_CPU * usable_cpus() // concurrent)
        n_workers = batch_workers(workers or default, len(cases), limits, box, concurrent)
        with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="agentgspo-interact") as pool:
            outcomes = list(pool.map(run, cases))
    results: list[TestResult] = []
    for result in outcomes:
        if result is None:
            break
        results.append(result)
        if stop_on_failure and result.verdict != Verdict.AC:
            break
    return results


def _interactive_verdict(
    name: str, events: list[dict], peer_code: int | None, peer_msg: str, limits: Limits, peer_crashed: bool = False
) -> TestResult:
    """The verdict rules of an interactive test, first match wins (docs/judge.md, "Verdict rules"):

    1. The interactor failed (testlib FAIL, an exit status testlib does not define, a Python interactor's crash)
       -> JE. Killed by SIGPIPE is not a failure: the solution ended while it still wrote (-> WA below).
    2. The interactor rejected (WA/PE) while the solution still ran, and the judge stopped the solution -> WA/PE
       (the kill is the judge's doing, so no verdict of the solution's comes from it).
    3. The solution's own TLE/ILE/MLE/OLE/RE -> that; except a runtime error (or SIGPIPE) after the interactor
       rejected and hung up (``peer_hung_up``: it had closed the solution's stdin when the solution ended, so the
       crash may be a reaction to EOF), which yields to the WA/PE.
    4. The interactor rejected -> WA/PE. 5. Else AC (testlib points / partial scores: AC with a score)."""
    test_events = [e for e in events if e.get("event") == "test"]
    compile_error = _compile_error_of(events)
    if compile_error is not None:
        return TestResult(name, Verdict.CE, message=compile_error)
    if not test_events or peer_code is None:
        return TestResult(name, Verdict.JE, message=_error_of(events) or peer_msg or "interactor did not start")
    event = test_events[0]
    own = classify_run(event, limits, interactive=True)
    if peer_crashed:
        return _test_result(
            name, event, Verdict.JE, f"interactor crashed (judge failure, not the solution's): {peer_msg}"
        )
    if peer_code == -signal.SIGPIPE:
        # Its only pipe out is the solution's stdin: the solution closed it (ended) while the interactor still
        # had something to say. That is the solution's failure (WA), unless its own verdict comes first: testlib's
        # rule. A Kattis validator never gets here: its adapter holds that pipe open, as Kattis's runner does.
        peer_code, peer_msg = 1, f"the solution closed its input before the interactor was done {peer_msg}".strip()
    peer_verdict, peer_msg, score = testlib_outcome(peer_code, peer_msg, role="interactor")
    if peer_verdict == Verdict.JE:
        return _test_result(name, event, Verdict.JE, peer_msg)
    rejected = peer_verdict in (Verdict.WA, Verdict.PE)
    stopped = bool(event.get("stopped") and event.get("stop_requested"))
    if rejected and stopped:
        return _test_result(
            name, event, peer_verdict, f"{peer_msg} (the solution was stopped when the interactor rejected)".strip()
        )
    # A runtime error after the interactor rejected and hung up (EOF, broken pipe) is a consequence: WA/PE wins.
    # One while the interactor still waited for the solution is the solution's own: RE.
    if own is not None and not (own == Verdict.RE and rejected and event.get("peer_hung_up", True)):
        return _test_result(name, event, own)
    if rejected:
        return _test_result(name, event, peer_verdict, peer_msg)
    if event.get("signal") == signal.SIGPIPE:
        return _test_result(name, event, Verdict.AC, "", score)
    return _test_result(name, event, Verdict.AC, peer_msg[:500], score)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@contextmanager
def _batch_slot():
    """Count this submission among the ones being run now; yields how many there are, this one included."""
    global _active_batches
    with _active_lock:
        _active_batches += 1
        count = _active_batches
    try:
        yield count
    finally:
        with _active_lock:
            _active_batches -= 1


def batch_workers(requested: int | None, n_tests: int, limits: Limits, box: Session, concurrent: int = 1) -> int:
    """How many tests of one submission run at once in its box.

    ``requested`` (None or >= 1) or, by default, the usable CPUs shared among the ``concurrent`` submissions;
    then capped by the test count, by the box's memory budget over the per-test memory limit, and by its process
    limit (a quarter of ``pids_limit``, leaving room for the solution's own threads and children).
    """
    workers = requested or max(1, usable_cpus() // max(1, concurrent))
    by_memory = int(getattr(box, "memory_budget_mb", limits.memory_limit_mb) // limits.memory_limit_mb)
    return max(1, min(workers, n_tests, by_memory, limits.pids_limit // 4))


# With stop_on_failure, the first tests whose inputs total at most this many bytes (the samples, the small hidden
# tests: at least one test) run in a call of their own before the rest. The runner stops by itself on a run-time
# failure only: a wrong answer is known once the checker has read the output, after the call. Most wrong programs
# (in RL, most samples) fail on those first tests, and then the large ones never run. Costs an AC program one more
# box start (tens of ms) when its tests are larger than this; none when they are smaller.
FIRST_CALL_MAX_BYTES = 64 << 10


def call_ranges(cases: Sequence[TestCase], stop_on_failure: bool) -> list[tuple[int, int]]:
    """The ``(start, end)`` ranges of ``cases`` run one call each: one range, or with ``stop_on_failure`` the
    longest prefix within FIRST_CALL_MAX_BYTES of inputs (at least one test) and then the rest."""
    total, first = 0, 0
    for case in cases:
        total += len(case.input)
        if first and total > FIRST_CALL_MAX_BYTES:
            break
        first += 1
    if not stop_on_failure or first >= len(cases):
        return [(0, len(cases))]
    return [(0, first), (first, len(cases))]


def _checked(event: dict, case: TestCase, checker: Checker, limits: Limits) -> TestResult:
    """One test's result from its runner event: the run's verdict (TLE, RE...), else the checker's."""
    verdict = classify_run(event, limits)
    message, score = "", None
    if verdict is None:
        output = base64.b64decode(event.get("stdout_b64", ""))
        check_case = getattr(checker, "check_case", None)  # a checker that needs the test itself (its name)
        verdict, message, *scored = (
            check_case(case, output) if check_case is not None else checker.check(case.input, output, case.answer)
        )
        score = scored[0] if scored else None
    return _test_result(case.name, event, verdict, message, score)


def _judge_batch(
    box: Session,
    source: str,
    lang: str,
    cases: list[TestCase],
    checker: Checker,
    limits: Limits,
    stop_on_failure: bool,
    io_mode: str,
    workers: int | None,
) -> tuple[list[TestResult], str | None]:
    spec = _run_spec(source, lang, box, limits, io_mode, "run")
    spec["stop_on_error"] = stop_on_failure
    results: list[TestResult] = []
    for start, end in call_ranges(cases, stop_on_failure):
        part = cases[start:end]
        with _batch_slot() as concurrent:
            events = box.call(
                dict(spec, workers=batch_workers(workers, len(part), limits, box, concurrent)), [c.input for c in part]
            )
        compile_error = _compile_error_of(events)
        if compile_error is not None:
            return [], compile_error
        checked: list[TestResult] = []
        for event in events:
            if event.get("event") == "test":
                checked.append(_checked(event, part[event["index"]], checker, limits))
                if stop_on_failure and checked[-1].verdict != Verdict.AC:
                    break
        results += checked
        if stop_on_failure and checked and checked[-1].verdict != Verdict.AC:
            break
        error = _error_of(events)
        if error is not None and len(checked) < len(part):
            # The box broke before all tests ran. A solution that kills its own runner gets RE; anything else is
            # the judge's failure.
            name = part[len(checked)].name
            if _solution_broke_the_box(events, box, limits):
                results.append(TestResult(name, Verdict.RE, message=f"{RUNNER_KILLED}: {error}"))
            else:
                results.append(TestResult(name, Verdict.JE, message=error))
            break
    return results, None


def overall_verdict(tests: Sequence[TestResult], expected: int) -> Verdict:
    """JE if any test is JE (never blamed on the solution); else the first non-AC verdict; AC if all passed."""
    if any(t.verdict == Verdict.JE for t in tests):
        return Verdict.JE
    for t in tests:
        if t.verdict != Verdict.AC:
            return t.verdict
    return Verdict.AC if len(tests) == expected else Verdict.JE


def judge(
    source: str,
    tests: Iterable["TestCase | tuple | dict"],
    *,
    lang: str = "py",
    checker: "str | Checker | None" = "tokens",
    interactor: str | os.PathLike | None = None,
    limits: Limits | None = None,
    stop_on_failure: bool = False,
    io_mode: str = "stdio",
    backend: "str | Sandbox" = "local",
    workers: int | None = None,
    testlib_h: str | os.PathLike | None = None,
) -> JudgeResult:
    """Judge ``source`` on ``tests``; returns a JudgeResult (never raises for bad solutions).

    lang: a language of ``languages.LANGUAGES`` by name or alias: ``python3`` (CPython; also ``py``), ``pypy3``,
    ``c`` (GNU C17), ``cpp`` (GNU C++17).

    tests: TestCase objects, ``(input, answer)`` pairs or ``{"input", "output"}`` dicts (str or bytes).
    checker: ``tokens`` | ``float:EPS`` | ``testlib:PATH`` | ``openr1:PATH`` or a Checker object.
    interactor: path of an interactor run as ``interactor INPUT LOG ANSWER`` with its stdio cross-piped to the
    solution's (exit codes as testlib's: 0 AC, 1 WA, 2 PE, 3 FAIL = JE...); a C++ source (``interactor.cpp``) is
    compiled against testlib.h first. With an interactor, a checker other than the default ``tokens`` judges the
    interactor's LOG (Polygon's checker-after-interactor); tests run in parallel like batch tests.
    testlib_h: the testlib.h to compile C++ checker/interactor sources against (see ``judge/testlib.py``).
    io_mode: "stdio", or "file" (the program reads input.txt and writes output.txt in its working directory).
    backend: "local" | "docker" | "remote" or a Sandbox instance (see ``get_sandbox``).
    workers: how many tests run at once inside the submission's box, each in its own process with its own limits
    (default: the usable CPUs shared among the submissions this process judges at the same time; capped by the
    box's memory and process budgets; the remote backend uses the server's default). Results are the same as
    with workers=1, except that a solution can disturb its own tests running beside it.
    Compiled languages go through the compile cache (``compile_cache.py``; ``JudgeResult.compile_cache`` says
    "hit", "miss" or "off"; the remote backend's server uses its own).
    Raises ValueError only for bad arguments (unknown language, checker or io_mode, missing interactor,
    workers < 1) and a bad ``AGENTGSPO_COMPILE_CACHE_MB``.
    """
    lang = normalize_language(lang)
    limits = limits or Limits()
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    if io_mode not in ("stdio", "file"):
        raise ValueError(f"unknown io_mode {io_mode!r}: expected 'stdio' or 'file' (input.txt/output.txt)")
    cases = [TestCase.coerce(t, i) for i, t in enumerate(tests)]
    the_checker = make_checker(checker, testlib_h)
    if interactor is not None and not Path(interactor).is_file():
        # else python3 exits 2 ("can't open file"), which reads as the solution's PE
        raise ValueError(f"interactor {str(interactor)!r} does not exist: pass the path of the interactor program")
    if interactor is not None and is_cpp_source(interactor):  # compiled now: a broken one is refused up front
        interactor = compile_testlib_program(interactor, testlib_h)
    sandbox = get_sandbox(backend)
    if hasattr(sandbox, "judge_remote"):
        if isinstance(checker, str) and checker.startswith("testlib:") and is_cpp_source(checker):
            checker = f"testlib:{the_checker.path}"  # the binary compiled here travels (no testlib.h there)
        return sandbox.judge_remote(
            source,
            cases,
            lang=lang,
            checker=checker,
            interactor=interactor,
            limits=limits,
            stop_on_failure=stop_on_failure,
            io_mode=io_mode,
        )
    compile_cache.cache_limit_bytes()  # a bad setting is the caller's to fix: raised here, never a JE
    missing = missing_tool(get_language(lang), sandbox)
    if missing is not None:
        return JudgeResult(Verdict.JE, message=missing)
    if lang == "cpp":
        host_pch_dir(build=True)
    try:
        with sandbox.session(limits.pids_limit) as box:
            compiled = _compile(box, source, lang, limits)
            compile_output, compile_s, cache_state = compiled.output, compiled.seconds, compiled.cache
            if compiled.error is not None:
                message = f"compilation could not run: {compiled.error}"
                return JudgeResult(Verdict.JE, message=message, compile_cache=cache_state)
            if not compiled.ok:
                return JudgeResult(
                    Verdict.CE, compile_output=compile_output, compile_time_s=compile_s, compile_cache=cache_state
                )
            if interactor is not None:
                transcript_checker = None if checker in (None, "tokens") else the_checker
                results = _judge_interactive(
                    box, source, lang, cases, str(interactor), limits, stop_on_failure, transcript_checker, workers
                )
                ce = next((r.message for r in results if r.verdict == Verdict.CE), None)
            else:
                results, ce = _judge_batch(
                    box, source, lang, cases, the_checker, limits, stop_on_failure, io_mode, workers
                )
    except Exception as exc:  # infrastructure: never blamed on the solution
        return JudgeResult(Verdict.JE, message=f"{type(exc).__name__}: {exc}")
    if ce is not None:
        return JudgeResult(Verdict.CE, compile_output=ce, compile_cache=cache_state)
    verdict = overall_verdict(results, len(cases))
    if stop_on_failure and verdict != Verdict.AC:
        results += [TestResult(c.name, Verdict.SKIPPED) for c in cases[len(results) :]]
    return JudgeResult(
        verdict, results, compile_output=compile_output, compile_time_s=compile_s, compile_cache=cache_state
    )


def run_python(
    code: str, stdin: str | bytes = "", *, limits: Limits | None = None, backend: "str | Sandbox" = "local"
) -> ExecResult:
    """Run a Python 3 program in the sandbox with ``stdin``; returns its stdout/stderr/exit status/measurements.

    verdict: OK, TLE, MLE, OLE, RE (non-zero exit or signal), CE (syntax error) or JE (sandbox failure).
    Default limits: 5 s CPU, 256 MB, 1 MB of stdout.
    """
    limits = limits or Limits(time_limit_s=5.0, memory_limit_mb=256, output_limit_mb=1.0)
    data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
    sandbox = get_sandbox(backend)
    if hasattr(sandbox, "run_remote"):
        return sandbox.run_remote(code, data, limits=limits)
    try:
        with sandbox.session(limits.pids_limit) as box:
            events = box.call(_run_spec(code, "python3", box, limits, "stdio", "run"), [data])
    except Exception as exc:
        return ExecResult(verdict=Verdict.JE, error=f"{type(exc).__name__}: {exc}")
    return exec_result(events, limits)


def exec_result(events: list[dict], limits: Limits) -> ExecResult:
    """The :class:`ExecResult` of a one-test run's runner events, classified as the judge classifies a test (used by
    :func:`run_python` and the SandboxFusion / Piston endpoints)."""
    compile_error = _compile_error_of(events)
    if compile_error is not None:
        return ExecResult(stderr=compile_error, exit_code=1, verdict=Verdict.CE)
    event = next((e for e in events if e.get("event") == "test"), None)
    if event is None:
        return ExecResult(verdict=Verdict.JE, error=_error_of(events) or "the sandbox reported no run")
    verdict = classify_run(event, limits) or Verdict.OK
    stdout = base64.b64decode(event.get("stdout_b64", ""))
    stderr = event.get("stderr", "")
    return ExecResult(
        stdout=stdout.decode("utf-8", "replace"),
        stderr=stderr,
        exit_code=event.get("exit_code"),
        signal=event.get("signal"),
        cpu_time_s=float(event.get("cpu_s", 0.0)),
        wall_time_s=float(event.get("wall_s", 0.0)),
        memory_mb=round(event.get("memory_kb", 0) / 1024, 2),
        stdout_truncated=event.get("stdout_bytes", 0) > len(stdout),
        stderr_truncated=len(stderr) >= limits.runner_limits()["stderr_bytes"],
        timed_out=verdict == Verdict.TLE,
        verdict=verdict,
    )
