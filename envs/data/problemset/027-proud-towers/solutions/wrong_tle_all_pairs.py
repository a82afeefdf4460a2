"""Checks every pair: O(n^2)."""
import sys

data = sys.stdin.buffer.read().split()
n = int(data[0])
h = list(map(int, data[1:n + 1]))
total = 0
for j in range(n):
    twice = 2 * h[j]
    total += sum(1 for i in range(j) if h[i] > twice)
print(total)
