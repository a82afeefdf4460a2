"""Adapter from the judge's interactor protocol to a Kattis interactive output validator (jury side, on the host).

The judge runs an interactor as ``interactor INPUT LOG`` with its stdin/stdout cross-piped to the solution and
reads exit 0 / 1 / other as accepted / wrong / judge error. A Kattis validator is run as
``validator JUDGE_IN JUDGE_ANS FEEDBACK_DIR/ [FLAGS] < solution's output > solution's input`` and exits 42 / 43.
For a Kattis test the judge's INPUT file is a JSON manifest written by ``kattis.py``:
``{"argv": [...], "input": PATH, "answer": PATH, "feedback_dir": DIR, "flags": [...]}``. This script starts the
validator on the same pipes (it keeps no copy of their write ends, so the solution sees the validator's end of
file) and turns its exit status into the judge's: 42 -> 0, 43 -> 1, anything else (a signal included) -> 3 (judge
error) with the reason on stderr. The validator's ``judgemessage.txt`` is copied to stderr, which the judge shows as
the test's message.

Kattis's rule for a solution that exits before the validator is done (problemtools'
``support/interactive/interactive.cc``: "We never close the read end of the validator -> user channel ... we do
want submissions that exit early to be accepted"): the validator's exit code decides. A solution may leave right
after its last answer without reading the validator's final reply, and the validator's writes to it must not
fail. So this adapter holds a read end of the validator's output pipe (reopened through ``/proc/self/fd/1``) until
the validator exits, and grows that pipe to 1 MiB as problemtools does: writes after the solution has gone land in
the pipe instead of raising SIGPIPE (up to 1 MiB; a validator that writes more to a solution that has gone blocks
until the judge gives up on it: a judge error). Where no read end can be held (the output is not a pipe), the
validator runs with SIGPIPE ignored, so such writes fail quietly (EPIPE). testlib interactors, run by the judge
without this adapter, keep testlib's rule instead: killed by SIGPIPE there is WA (docs/judge.md).
"""

import fcntl
import json
import os
import stat
import subprocess
import sys

EXIT_AC, EXIT_WA = 42, 43
PIPE_SIZE = 1 << 20  # problemtools' interactive runner grows its pipes to 1 MiB (the default unprivileged maximum)
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def hold_read_end(fd: int) -> int | None:
    """A read end of the pipe whose write end is ``fd`` (opened anew through /proc), with the pipe grown to
    PIPE_SIZE where the kernel allows; None when ``fd`` is not a pipe or cannot be reopened."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        held = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.fcntl(held, F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass  # over the per-user pipe budget: the default size (64 KiB) still takes a final reply
    return held


def main() -> int:
    """Run the validator of the manifest ``sys.argv[1]``; return the judge's exit code."""
    with open(sys.argv[1]) as f:
        manifest = json.load(f)
    feedback_dir = manifest["feedback_dir"]
    os.makedirs(feedback_dir, exist_ok=True)
    argv = manifest["argv"] + [manifest["input"], manifest["answer"], feedback_dir + os.sep] + manifest["flags"]
    held = hold_read_end(1)  # the validator's writes to a solution that has exited must not fail (Kattis's rule)
    try:
        # Without a held read end, SIGPIPE stays ignored in the validator (restore_signals=False keeps Python's
        # SIG_IGN): a write to a solution that has gone fails with EPIPE instead of killing the validator.
        validator = subprocess.Popen(argv, stdin=0, stdout=1, cwd=feedback_dir, restore_signals=held is not None)
    except OSError as exc:
        print(f"output validator could not start: {exc}", file=sys.stderr)
        return 3
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # drop our copies of the pipes: the solution must see the validator's EOF, not ours
    os.dup2(devnull, 1)
    code = validator.wait()
    if held is not None:
        os.close(held)
    try:
        with open(os.path.join(feedback_dir, "judgemessage.txt"), errors="replace") as f:
            sys.stderr.write(f.read(2000))
    except OSError:
        pass
    if code == EXIT_AC:
        return 0
    if code == EXIT_WA:
        return 1
    reason = f"killed by signal {-code}" if code < 0 else f"exited with {code}"
    print(f"\noutput validator {reason} (expected 42 or 43)", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
