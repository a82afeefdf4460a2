"""Adapter from the judge's interactor protocol to a Kattis interactive output validator (jury side, on the host).

The judge runs an interactor as ``interactor INPUT LOG`` with its stdin/stdout cross-piped to the solution and
reads exit 0 / 1 / other as accepted / wrong / judge error. A Kattis validator is run as
``validator JUDGE_IN JUDGE_ANS FEEDBACK_DIR/ [FLAGS] < solution's output > solution's input`` and exits 42 / 43.
For a Kattis test the judge's INPUT file is a JSON manifest written by ``kattis.py``:
``{"argv": [...], "input": PATH, "answer": PATH, "feedback_dir": DIR, "flags": [...]}``. This script starts the
validator on the same pipes (it keeps no copy of them, so the solution sees the validator's end of file),
and turns its exit status into the judge's: 42 -> 0, 43 -> 1, killed by SIGPIPE -> SIGPIPE (the solution hung up
early), anything else -> 3 (judge error) with the reason on stderr. The validator's ``judgemessage.txt`` is
copied to stderr, which the judge shows as the test's message.
"""

import json
import os
import signal
import subprocess
import sys

EXIT_AC, EXIT_WA = 42, 43


def main() -> int:
    """Run the validator of the manifest ``sys.argv[1]``; return the judge's exit code."""
    with open(sys.argv[1]) as f:
        manifest = json.load(f)
    feedback_dir = manifest["feedback_dir"]
    os.makedirs(feedback_dir, exist_ok=True)
    argv = manifest["argv"] + [manifest["input"], manifest["answer"], feedback_dir + os.sep] + manifest["flags"]
    try:
        validator = subprocess.Popen(argv, stdin=0, stdout=1, cwd=feedback_dir)
    except OSError as exc:
        print(f"output validator could not start: {exc}", file=sys.stderr)
        return 3
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # drop our copies of the pipes: the solution must see the validator's EOF, not ours
    os.dup2(devnull, 1)
    code = validator.wait()
    try:
        with open(os.path.join(feedback_dir, "judgemessage.txt"), errors="replace") as f:
            sys.stderr.write(f.read(2000))
    except OSError:
        pass
    if code == EXIT_AC:
        return 0
    if code == EXIT_WA:
        return 1
    if code == -signal.SIGPIPE:  # the solution closed its end first: report it as the judge's SIGPIPE rule expects
        sys.stderr.flush()
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    reason = f"killed by signal {-code}" if code < 0 else f"exited with {code}"
    print(f"\noutput validator {reason} (expected 42 or 43)", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
