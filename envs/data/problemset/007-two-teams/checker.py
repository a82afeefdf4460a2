"""Checker of 007-two-teams: `checker.py INPUT OUTPUT ANSWER`; exit 0 AC, 1 WA, 2 PE, 3 FAIL.

Per test case: D must be the jury's (minimum) difference, the k numbers distinct, within [1, n], 1 <= k <= n - 1,
and the two strengths must differ by exactly D."""
import sys


def verdict(code, message):
    sys.stderr.write(message + "\n")
    sys.exit(code)


def integers(path, what):
    try:
        return [int(token) for token in open(path).read().split()]
    except ValueError:
        verdict(2 if what == "output" else 3, f"the {what} holds a token that is not an integer")


tests = integers(sys.argv[1], "input")[1:]
output, answer = integers(sys.argv[2], "output"), integers(sys.argv[3], "answer")
pos = jury = 0
for case, n in enumerate(tests, start=1):
    total = n * (n + 1) // 2
    jury_d, jury_k = answer[jury], answer[jury + 1]
    jury += 2 + jury_k
    if jury_d != total % 2:
        verdict(3, f"test case {case}: the jury's difference {jury_d} is not {total % 2}")
    if pos + 2 > len(output):
        verdict(2, f"test case {case}: the output ended early")
    d, k = output[pos], output[pos + 1]
    if not 1 <= k <= n - 1:
        verdict(1, f"test case {case}: team size {k} outside [1, {n - 1}]")
    if pos + 2 + k > len(output):
        verdict(2, f"test case {case}: the output ended before {k} shirt numbers")
    team = output[pos + 2:pos + 2 + k]
    pos += 2 + k
    if len(set(team)) != k or not all(1 <= x <= n for x in team):
        verdict(1, f"test case {case}: the shirt numbers must be {k} distinct values in [1, {n}]")
    strength = sum(team)
    if abs(2 * strength - total) != d:
        verdict(1, f"test case {case}: the strengths differ by {abs(2 * strength - total)}, not by {d}")
    if d != jury_d:
        verdict(1, f"test case {case}: difference {d}, but {jury_d} is possible")
if pos != len(output):
    verdict(2, f"extra output after {len(tests)} test cases")
verdict(0, f"{len(tests)} test cases")
