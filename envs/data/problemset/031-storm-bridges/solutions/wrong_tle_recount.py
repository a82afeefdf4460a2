"""After every closure recounts all zones with a BFS: O(q * (n + m))."""
import sys

data = sys.stdin.buffer.read().split()
n, m, q = int(data[0]), int(data[1]), int(data[2])
edges = [(int(data[3 + 2 * i]), int(data[4 + 2 * i])) for i in range(m)]
closing = [int(x) for x in data[3 + 2 * m:3 + 2 * m + q]]
open_ = [True] * m
res = []
for c in closing:
    open_[c - 1] = False
    adj = [[] for _ in range(n + 1)]
    for i, (u, v) in enumerate(edges):
        if open_[i]:
            adj[u].append(v)
            adj[v].append(u)
    seen = [False] * (n + 1)
    best = 0
    for s in range(1, n + 1):
        if not seen[s]:
            seen[s] = True
            stack, cnt = [s], 0
            while stack:
                x = stack.pop()
                cnt += 1
                for y in adj[x]:
                    if not seen[y]:
                        seen[y] = True
                        stack.append(y)
            best = max(best, cnt)
    res.append(best)
print(*res)
