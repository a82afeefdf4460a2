# 001-even-split: prefix sums (Python ints do not overflow); a cut works when 2 * prefix == total. O(n).
import sys
from itertools import accumulate


def main():
    data = sys.stdin.buffer.read().split()
    t, pos, out = int(data[0]), 1, []
    for _ in range(t):
        n = int(data[pos])
        a = list(map(int, data[pos + 1:pos + 1 + n]))
        pos += 1 + n
        total = sum(a)
        out.append(sum(1 for p in accumulate(a[:-1]) if 2 * p == total))
    print("\n".join(map(str, out)))


main()
