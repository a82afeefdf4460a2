"""Greedy: walk the column and close a group as soon as its sum reaches total / k (keeping enough camels for the
remaining groups). Balanced sums look optimal but are not, with uneven loads."""
import sys

data = sys.stdin.buffer.read().split()
n, k = int(data[0]), int(data[1])
a = list(map(int, data[2:2 + n]))
target = sum(a) / k
groups, run, left = [], 0, k
for i, x in enumerate(a):
    run += x
    remaining = n - i - 1
    if left > 1 and (run >= target or remaining == left - 1):
        groups.append(run)
        run, left = 0, left - 1
groups.append(run)
print(sum(g * g for g in groups))
