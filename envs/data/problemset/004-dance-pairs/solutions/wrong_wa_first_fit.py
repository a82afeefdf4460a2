# 004-dance-pairs, wrong: each first-school dancer, in input order, takes the first free partner close enough.
import bisect
import sys

data = sys.stdin.buffer.read().split()
n, m, d = int(data[0]), int(data[1]), int(data[2])
a = list(map(int, data[3:3 + n]))
free = sorted(map(int, data[3 + n:3 + n + m]))
pairs = 0
for x in a:
    k = bisect.bisect_left(free, x - d)
    if k < len(free) and free[k] <= x + d:
        free.pop(k)
        pairs += 1
print(pairs)
