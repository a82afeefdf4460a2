"""DP that only moves right or down: misses winding paths that go up or left."""
import sys

data = sys.stdin.buffer.read().split()
n, m = int(data[0]), int(data[1])
rows = data[2:2 + n]
INF = float("inf")
best = [[INF] * m for _ in range(n)]
for r in range(n):
    for c in range(m):
        cost = 1 if rows[r][c] == 35 else 0
        if r == 0 and c == 0:
            best[r][c] = 0
            continue
        prev = min(best[r - 1][c] if r else INF, best[r][c - 1] if c else INF)
        best[r][c] = prev + cost
print(best[n - 1][m - 1])
