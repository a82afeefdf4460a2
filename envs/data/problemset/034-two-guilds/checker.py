"""Checker for Two Guilds: `checker.py INPUT OUTPUT ANSWER` (testlib exit codes: 0 AC, 1 WA, 2 PE, 3 FAIL).
A YES answer needs a proper 2-colouring; a NO answer needs an odd cycle of distinct vertices joined by feuds. Both
are verified against the input, so any valid answer passes; the jury's answer only supplies which case holds (a
contestant who proves the opposite case means a broken jury answer: FAIL)."""
import sys


def fail(code, message):
    print(message)
    sys.exit(code)


def main():
    data = open(sys.argv[1]).read().split()
    n, m = int(data[0]), int(data[1])
    edges = [(int(data[2 + 2 * i]), int(data[3 + 2 * i])) for i in range(m)]
    jury = open(sys.argv[3]).read().split()
    out = open(sys.argv[2]).read().split()
    if not out or out[0] not in ("YES", "NO"):
        fail(2, f"expected YES or NO, got {out[:1]}")
    if not all(tok.lstrip("-").isdigit() for tok in out[1:]):
        fail(2, "non-integer token after the first line")
    nums = [int(tok) for tok in out[1:]]
    if out[0] == "YES":
        if len(nums) != n:
            fail(2, f"expected {n} guild numbers, got {len(nums)}")
        if any(g not in (1, 2) for g in nums):
            fail(1, "a guild number is not 1 or 2")
        for u, v in edges:
            if nums[u - 1] == nums[v - 1]:
                fail(1, f"feuding merchants {u} and {v} share guild {nums[u - 1]}")
        if jury[0] != "YES":
            fail(3, "the contestant found a valid split where the jury claims none exists")
        sys.exit(0)
    if not nums or len(nums) != nums[0] + 1:
        fail(2, "expected k followed by k merchants")
    k, cycle = nums[0], nums[1:]
    if k < 3 or k % 2 == 0:
        fail(1, f"k = {k} is not an odd number >= 3")
    if any(not 1 <= c <= n for c in cycle) or len(set(cycle)) != k:
        fail(1, "circle merchants are not distinct numbers in 1..n")
    feuds = {(min(u, v), max(u, v)) for u, v in edges}
    for j in range(k):
        a, b = cycle[j], cycle[(j + 1) % k]
        if (min(a, b), max(a, b)) not in feuds:
            fail(1, f"merchants {a} and {b} are consecutive in the circle but do not feud")
    if jury[0] != "NO":
        fail(3, "the contestant found an odd circle where the jury found a split")
    sys.exit(0)


main()
