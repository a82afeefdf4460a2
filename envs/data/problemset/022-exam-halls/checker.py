"""Checker for Exam Halls: `checker.py INPUT OUTPUT ANSWER` (testlib exit codes: 0 AC, 1 WA, 2 PE, 3 FAIL).
The hall count must equal the maximum number of exams sharing one day (computed here from the input, and
compared with the jury's answer), every hall number must lie in 1..k, and exams in one hall must not share a day."""
import sys


def main():
    data = open(sys.argv[1]).read().split()
    n = int(data[0])
    exams = [(int(data[1 + 2 * i]), int(data[2 + 2 * i])) for i in range(n)]
    events = sorted([(l, 0) for l, _ in exams] + [(r, 1) for _, r in exams])  # starts before ends on a day
    depth = best = 0
    for _, kind in events:
        depth += 1 if kind == 0 else -1
        best = max(best, depth)
    jury = open(sys.argv[3]).read().split()
    if not jury or int(jury[0]) != best:
        print(f"jury answer {jury[:1]} differs from the maximum overlap {best}")
        sys.exit(3)
    out = open(sys.argv[2]).read().split()
    if len(out) != n + 1 or not all(tok.lstrip("-").isdigit() for tok in out):
        print(f"expected {n + 1} integers, got {len(out)} tokens")
        sys.exit(2)
    k, halls = int(out[0]), [int(tok) for tok in out[1:]]
    if k != best:
        print(f"uses {k} halls, the minimum is {best}")
        sys.exit(1)
    per_hall = {}
    for i, h in enumerate(halls):
        if not 1 <= h <= k:
            print(f"exam {i + 1} gets hall {h}, outside 1..{k}")
            sys.exit(1)
        per_hall.setdefault(h, []).append(exams[i] + (i + 1,))
    for h, items in per_hall.items():
        items.sort()
        for (l1, r1, i1), (l2, r2, i2) in zip(items, items[1:]):
            if l2 <= r1:
                print(f"exams {i1} and {i2} share day {l2} in hall {h}")
                sys.exit(1)
    sys.exit(0)


main()
