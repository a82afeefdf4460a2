"""Builds a set for every list: O(n * q) in the worst case."""
import sys

data = sys.stdin.buffer.read().split()
n, q = int(data[0]), int(data[1])
c = data[2:2 + n]
out = []
for j in range(q):
    l, r = int(data[2 + n + 2 * j]), int(data[3 + n + 2 * j])
    out.append(len(set(c[l - 1:r])))
print("\n".join(map(str, out)))
