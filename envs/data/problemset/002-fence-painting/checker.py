"""Checker of 002-fence-painting: `checker.py INPUT OUTPUT ANSWER`; exit 0 AC, 1 WA, 2 PE, 3 FAIL.

The output must give the jury's (minimum) count r and a fence over RGB with no equal neighbours that differs from
the input in exactly r positions."""
import sys


def verdict(code, message):
    sys.stderr.write(message + "\n")
    sys.exit(code)


s = open(sys.argv[1]).read().split()[1]
jury_r = int(open(sys.argv[3]).read().split()[0])
tokens = open(sys.argv[2]).read().split()
if len(tokens) != 2 or not tokens[0].lstrip("-").isdigit():
    verdict(2, f"expected a count and a fence, got {len(tokens)} tokens")
r, t = int(tokens[0]), tokens[1]
if len(t) != len(s) or set(t) - set("RGB"):
    verdict(1, f"the fence must be {len(s)} letters over RGB")
if any(a == b for a, b in zip(t, t[1:])):
    verdict(1, "two neighbouring planks have the same colour")
changed = sum(a != b for a, b in zip(s, t))
if changed != r:
    verdict(1, f"the fence differs from s in {changed} positions, not {r}")
if r < jury_r:
    verdict(3, f"participant repainted {r} < jury's {jury_r}: the jury is wrong")
if r > jury_r:
    verdict(1, f"{r} repaints, {jury_r} suffice")
verdict(0, f"{r} repaints")
