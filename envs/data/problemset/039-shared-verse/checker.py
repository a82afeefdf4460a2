"""Checker for Shared Verse: `checker.py INPUT OUTPUT ANSWER` (testlib exit codes: 0 AC, 1 WA, 2 PE, 3 FAIL).
The length must equal the jury's; the printed string (when the length is positive) must have that length and
occur in both scrolls."""
import sys


def main():
    s, t = open(sys.argv[1]).read().split()[:2]
    jury = int(open(sys.argv[3]).read().split()[0])
    out = open(sys.argv[2]).read().split()
    if not out or not out[0].isdigit():
        print("expected the length on the first line")
        sys.exit(2)
    length = int(out[0])
    if length != jury:
        print(f"length {length}, expected {jury}")
        sys.exit(1)
    if len(out) != (2 if length > 0 else 1):
        print(f"expected {'the length and a string' if length > 0 else 'only the length'}, got {len(out)} tokens")
        sys.exit(2)
    if length == 0:
        sys.exit(0)
    verse = out[1]
    if len(verse) != length:
        print(f"the string has length {len(verse)}, not {length}")
        sys.exit(1)
    if verse not in s or verse not in t:
        print(f"{verse[:30]!r}... does not occur in {'s' if verse not in s else 't'}")
        sys.exit(1)
    sys.exit(0)


main()
