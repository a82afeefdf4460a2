# 001-even-split, wrong: also counts the cut after the last crate (k = n), where Oskar carries nothing.
import sys

data = sys.stdin.buffer.read().split()
t, pos = int(data[0]), 1
for _ in range(t):
    n = int(data[pos])
    a = list(map(int, data[pos + 1:pos + 1 + n]))
    pos += 1 + n
    total, prefix, count = sum(a), 0, 0
    for k in range(n):
        prefix += a[k]
        if 2 * prefix == total:
            count += 1
    print(count)
