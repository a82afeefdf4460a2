"""The judge's compile cache (``sandboxes/judge/compile_cache.py``) with real compilers in real sandboxes: one compile
per source across threads and processes, never an entry of another compiler, language or corrupt file, the verdicts
of a compile, the cached program out of the solution's reach, the LRU bound, an unwritable cache, the setting, the
remote round trip and validate-problems' calibration."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentgspo.sandboxes import JudgeResult, Limits, SandboxUnavailable, Verdict, get_sandbox, judge
from agentgspo.sandboxes import local as local_module
from agentgspo.sandboxes.judge import compile as compile_module
from agentgspo.sandboxes.judge import compile_cache
from agentgspo.sandboxes.judge.compile_cache import STATS

LIMITS = Limits(time_limit_s=0.5, memory_limit_mb=128, output_limit_mb=1, wall_limit_s=1.5)
APLUSB = [("1 2\n", "3\n"), ("10 -4\n", "6\n")]
SUM = '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}\n'
PROGRAMS = {  # C++ sources by the verdict they earn on APLUSB
    "AC": SUM,
    "WA": '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a*b);}\n',
    "RE": "#include <cstdio>\nint main(){int *p = nullptr; volatile int x = *p; return x;}\n",
    "TLE": "int main(){volatile unsigned long x = 0; for(;;) x++;}\n",
}
# Valid C++ and not C (no <iostream> in C): a C judge of it must compile it, never take the C++ entry.
CPP_ONLY = '#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n'
# Tries to change the program it runs from: its mode, its bytes, the file itself; then answers.
TAMPERER = r"""#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    chmod(argv[0], 0777);
    int fd = open(argv[0], O_WRONLY | O_TRUNC);
    if (fd >= 0) { write(fd, "tampered", 8); close(fd); }
    if (unlink(argv[0]) == 0) {
        fd = open(argv[0], O_WRONLY | O_CREAT, 0777);
        if (fd >= 0) { write(fd, "#!/bin/sh\necho 0\n", 17); close(fd); }
    }
    long long a, b;
    scanf("%lld %lld", &a, &b);
    printf("%lld\n", a + b);
}
"""


@pytest.fixture
def local():
    try:
        sandbox = get_sandbox("local")
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap unavailable: {exc}")
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed: sudo bash .ci/setup_sandboxes.sh")
    return sandbox


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """A private, empty compile cache (``$AGENTGSPO_CACHE/compile``) at the default size; returns its folder."""
    monkeypatch.setenv("AGENTGSPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(compile_cache.SETTING, raising=False)
    monkeypatch.setattr(compile_cache, "_warned", set())  # each test sees its own first warning
    return tmp_path / "cache" / "compile"


def entries(cache: Path) -> list[Path]:
    folder = cache / "entries"
    return sorted(p for p in folder.iterdir() if ".tmp" not in p.name) if folder.is_dir() else []


def counted(before: dict[str, int]) -> dict[str, int]:
    """STATS since ``before``, the counts that moved."""
    return {name: count - before[name] for name, count in STATS.snapshot().items() if count != before[name]}


def test_two_threads_judging_one_source_compile_it_once(local, cache):
    start = threading.Barrier(2)
    results: list[JudgeResult] = []

    def one() -> None:
        start.wait()
        results.append(judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local))

    before = STATS.snapshot()
    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.verdict for r in results] == [Verdict.AC, Verdict.AC], [r.to_dict() for r in results]
    assert sorted(r.compile_cache for r in results) == ["hit", "miss"]
    assert counted(before) == {"hits": 1, "misses": 1, "stores": 1} and len(entries(cache)) == 1


PROCESS = """
import sys, time
from pathlib import Path
from agentgspo.sandboxes import Limits, get_sandbox, judge
from agentgspo.sandboxes.judge.compile import host_pch_dir
sandbox = get_sandbox("local")
host_pch_dir(build=True)
go = Path(sys.argv[1])
Path(f"{go}.ready{sys.argv[3]}").touch()
while not go.exists():
    time.sleep(0.005)
result = judge(sys.argv[2], [("1 2", "3")], lang="cpp", limits=Limits(time_limit_s=0.5), backend=sandbox)
print(result.verdict.value, result.compile_cache)
"""


def test_two_processes_judging_one_source_compile_it_once(local, cache, tmp_path):
    # The processes share this process's precompiled header (else each would build one before judging).
    shared_pch = compile_module.host_pch_dir(build=True)
    if shared_pch is not None:
        cache.parent.mkdir(parents=True)
        (cache.parent / "pch").symlink_to(shared_pch.parent)
    go = tmp_path / "go"
    env = {**os.environ, "AGENTGSPO_CACHE": str(cache.parent)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS, str(go), SUM, str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(2)
    ]
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.ready{i}").exists() for i in range(2)) and time.monotonic() < deadline:
        time.sleep(0.01)  # both have the judge imported and its sandbox ready: they start at once
    go.touch()
    outputs = [proc.communicate(timeout=120) for proc in procs]
    lines = sorted(out.decode().strip() for out, _ in outputs)
    assert lines == ["AC hit", "AC miss"], [err.decode()[-2000:] for _, err in outputs]
    assert len(entries(cache)) == 1


def test_an_entry_of_another_compiler_version_is_not_used(local, cache, monkeypatch):
    # "g++ (Debian 12.2.0-14) 12.2.0": the identity has it after the resolved program's name
    version = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    version = version.split(" ", 1)[1]
    assert version in compile_cache.host_compiler_identity("g++")
    assert judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local).compile_cache == "miss"
    real = compile_cache.host_compiler_identity

    def upgraded(tool: str) -> str | None:  # the same compiler after an upgrade: another --version
        return real(tool).replace(version, "(Debian 99.1.0-1) 99.1.0")

    monkeypatch.setattr(compile_cache, "host_compiler_identity", upgraded)
    other = judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local)
    assert (other.verdict, other.compile_cache) == (Verdict.AC, "miss") and len(entries(cache)) == 2
    monkeypatch.setattr(compile_cache, "host_compiler_identity", real)
    assert judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local).compile_cache == "hit"


@pytest.mark.parametrize("expected", list(PROGRAMS))
def test_a_hit_gives_the_verdicts_of_a_miss(local, expected):
    miss = judge(PROGRAMS[expected], APLUSB, lang="cpp", limits=LIMITS, backend=local)
    hit = judge(PROGRAMS[expected], APLUSB, lang="cpp", limits=LIMITS, backend=local)
    assert (miss.compile_cache, hit.compile_cache) == ("miss", "hit")
    assert miss.verdict.value == hit.verdict.value == expected, (miss.to_dict(), hit.to_dict())
    assert [t.verdict for t in hit.tests] == [t.verdict for t in miss.tests]
    assert hit.compile_output == miss.compile_output  # the compiler's warnings come with the program


def test_a_compile_error_is_never_cached_nor_served_from_another_entry(local, cache):
    assert judge(CPP_ONLY, APLUSB, lang="cpp", limits=LIMITS, backend=local).verdict == Verdict.AC
    for _ in range(2):  # the same bytes as C: compiled each time (a CE is not stored), never the C++ program
        as_c = judge(CPP_ONLY, APLUSB, lang="c", limits=LIMITS, backend=local)
        assert (as_c.verdict, as_c.compile_cache) == (Verdict.CE, "miss") and "iostream" in as_c.compile_output
    broken = [judge("int main( {", APLUSB, lang="cpp", limits=LIMITS, backend=local) for _ in range(2)]
    assert [(r.verdict, r.compile_cache) for r in broken] == [(Verdict.CE, "miss")] * 2
    assert broken[0].compile_output == broken[1].compile_output and "error" in broken[0].compile_output
    assert len(entries(cache)) == 1  # only the C++ program that compiled


def _tamper_and_check(sandbox, cache: Path) -> None:
    # One test: on Docker the box's copy is the solution's to change, and a sibling test would run the changed one.
    tests = APLUSB[:1]
    first = judge(TAMPERER, tests, lang="cpp", limits=LIMITS, backend=sandbox)
    assert (first.verdict, first.compile_cache) == (Verdict.AC, "miss"), first.to_dict()
    [entry] = entries(cache)
    stored, mode = entry.read_bytes(), entry.stat().st_mode
    for _ in range(2):
        again = judge(TAMPERER, tests, lang="cpp", limits=LIMITS, backend=sandbox)
        assert (again.verdict, again.compile_cache) == (Verdict.AC, "hit"), again.to_dict()
        assert entry.read_bytes() == stored and entry.stat().st_mode == mode


def test_the_solution_cannot_change_the_cached_program(local, cache):
    _tamper_and_check(local, cache)


@pytest.mark.docker
def test_the_solution_cannot_change_the_cached_program_on_docker(docker_backend, cache):
    _tamper_and_check(docker_backend, cache)


@pytest.mark.docker
def test_docker_programs_are_keyed_by_the_image(docker_backend, local, cache):
    """A program compiled in the image is not used on the host (another compiler), nor the other way round."""
    in_image = [judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=docker_backend) for _ in range(2)]
    assert [(r.verdict, r.compile_cache) for r in in_image] == [(Verdict.AC, "miss"), (Verdict.AC, "hit")]
    on_host = judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local)
    assert (on_host.verdict, on_host.compile_cache) == (Verdict.AC, "miss") and len(entries(cache)) == 2


def test_unisolated_sessions_share_programs_of_each_language(cache, monkeypatch):
    """Without bubblewrap each session's binary directory is its own host folder: the key leaves it out and a
    cached PyPy launcher finds its source beside itself, so a hit in another session still runs."""
    if shutil.which("g++") is None or shutil.which("pypy3") is None:
        pytest.skip("g++ or pypy3 not installed: sudo bash .ci/setup_sandboxes.sh")
    monkeypatch.setattr(local_module, "_probe_result", "bwrap taken away by the test")
    unisolated = local_module.LocalSandbox(allow_unisolated=True)
    assert not unisolated.isolated
    pypy = "import sys\na, b = map(int, input().split())\nprint(a + b)\nraise SystemExit(len(sys.argv) - 1)\n"
    for lang, source in (("cpp", SUM), ("pypy3", pypy)):
        results = [judge(source, APLUSB, lang=lang, limits=LIMITS, backend=unisolated) for _ in range(2)]
        assert [(r.verdict, r.compile_cache) for r in results] == [(Verdict.AC, "miss"), (Verdict.AC, "hit")], [
            r.to_dict() for r in results
        ]


def _static_program(tag: int) -> str:
    """A C++ program whose binary holds ~350 KB of initialised data (distinct per ``tag``)."""
    return (
        f"#include <cstdio>\nstatic char big[350000] = {{{tag}}};\n"
        'int main(int argc, char **) { long long a, b; scanf("%lld %lld", &a, &b); '
        'printf("%lld\\n", a + b + big[argc * 1000]); }\n'
    )


def test_the_size_bound_evicts_the_least_recently_used_entry(local, cache, monkeypatch):
    monkeypatch.setenv(compile_cache.SETTING, "1")  # 1 MB: two of these programs fit, three do not
    first, second, third = (_static_program(tag) for tag in (1, 2, 3))

    def state(source: str) -> str:
        result = judge(source, APLUSB, lang="cpp", limits=LIMITS, backend=local)
        assert result.verdict == Verdict.AC, result.to_dict()
        return result.compile_cache

    before = STATS.snapshot()
    assert [state(first), state(second), state(first)] == ["miss", "miss", "hit"]  # first is now the recent one
    assert state(third) == "miss"  # over 1 MB: the least recently used (second) goes
    assert sum(p.stat().st_size for p in entries(cache)) <= 1 << 20 and len(entries(cache)) == 2
    assert [state(first), state(third), state(second)] == ["hit", "hit", "miss"]
    assert counted(before)["evictions"] == 2  # second, then (when second came back) the then oldest, first


def test_a_program_over_half_the_size_is_not_stored_and_stale_temporary_files_go(local, cache, monkeypatch):
    monkeypatch.setenv(compile_cache.SETTING, "1")
    big = _static_program(4).replace("350000", "600000")  # a ~620 KB binary: over half of 1 MB
    results = [judge(big, APLUSB, lang="cpp", limits=LIMITS, backend=local) for _ in range(2)]
    assert [(r.verdict, r.compile_cache) for r in results] == [(Verdict.AC, "miss")] * 2 and entries(cache) == []
    stale, fresh = cache / "entries" / "0123.tmp99.1", cache / "entries" / "4567.tmp99.2"
    for left in (stale, fresh):  # written by processes that died mid-write, two hours and a moment ago
        left.write_bytes(b"half an entry")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    assert judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local).compile_cache == "miss"  # a store evicts
    assert not stale.exists() and fresh.exists() and len(entries(cache)) == 1


def test_an_unwritable_cache_still_judges_correctly(local, cache, caplog):
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the cache's folder should be")
    before = STATS.snapshot()
    with caplog.at_level(logging.WARNING, logger=compile_cache.__name__):
        results = {
            verdict: judge(PROGRAMS[verdict], APLUSB, lang="cpp", limits=LIMITS, backend=local)
            for verdict in ("AC", "WA")
        }
        broken = judge("int main( {", APLUSB, lang="cpp", limits=LIMITS, backend=local)
    assert {v: (r.verdict.value, r.compile_cache) for v, r in results.items()} == {
        "AC": ("AC", "miss"),
        "WA": ("WA", "miss"),
    }
    assert (broken.verdict, broken.compile_cache) == (Verdict.CE, "miss")
    warnings = [r for r in caplog.records if r.name == compile_cache.__name__]
    assert len(warnings) == 1 and str(cache) in warnings[0].getMessage()  # once, naming the folder
    assert counted(before)["errors"] == 3 and "hits" not in counted(before)


def test_a_corrupt_entry_is_a_miss_and_is_replaced(local, cache, caplog):
    assert judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local).compile_cache == "miss"
    [entry] = entries(cache)
    data = bytearray(entry.read_bytes())
    data[-200] ^= 0xFF  # one flipped byte in the program's code
    entry.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger=compile_cache.__name__):
        again = judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local)
    assert (again.verdict, again.compile_cache) == (Verdict.AC, "miss")
    assert any("not a valid entry" in r.getMessage() for r in caplog.records)
    assert judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local).compile_cache == "hit"


@pytest.mark.parametrize("value", ["1.5", "lots", "-1"])
def test_a_bad_size_setting_is_refused_naming_it(local, monkeypatch, value):
    monkeypatch.setenv(compile_cache.SETTING, value)
    with pytest.raises(ValueError, match=f"{compile_cache.SETTING}={value!r}.*whole number of megabytes"):
        judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local)
    from agentgspo.sandboxes.server import create_app

    with pytest.raises(ValueError, match=compile_cache.SETTING):  # a server refuses to start
        create_app("token")


def test_size_zero_turns_the_cache_off(local, cache, monkeypatch):
    monkeypatch.setenv(compile_cache.SETTING, "0")
    before = STATS.snapshot()
    results = [judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=local) for _ in range(2)]
    assert [(r.verdict, r.compile_cache) for r in results] == [(Verdict.AC, "off")] * 2
    assert not cache.exists() and counted(before) == {}
    assert judge("print(sum(map(int, input().split())))", APLUSB, backend=local).compile_cache == "off"  # CPython


def test_the_cache_state_travels_in_the_json_and_through_the_remote_backend(local):
    from servers import serve

    from agentgspo.sandboxes.server import create_app

    assert JudgeResult.from_dict(JudgeResult(Verdict.AC, compile_cache="hit").to_dict()).compile_cache == "hit"
    with serve(create_app("token", max_concurrency=2)) as url:  # the server judges in this process, cache here
        remote = get_sandbox("remote", endpoints=[url], token="token")
        results = [judge(SUM, APLUSB, lang="cpp", limits=LIMITS, backend=remote) for _ in range(2)]
    assert [(r.verdict, r.compile_cache) for r in results] == [(Verdict.AC, "miss"), (Verdict.AC, "hit")]


def test_validate_problems_calibration_compiles_its_program_once(local, monkeypatch):
    from agentgspo.commands import validate_problems

    # validate-problems calibrates before each problem's references: here two problems' calibrations, small.
    monkeypatch.setattr(validate_problems, "CALIBRATION_ROUNDS", {"python": 3, "cpp": 1})
    before = STATS.snapshot()
    for _ in range(2):
        validate_problems.measure_machine_speed("local", runs=1)
    assert counted(before) == {"misses": 1, "stores": 1, "hits": 1}  # C++ compiled once; Python has no compile
