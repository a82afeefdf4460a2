"""Greedy: find one cheapest path without the pass, then use the pass on its most expensive road."""
import heapq
import sys

data = sys.stdin.buffer.read().split()
n, m = int(data[0]), int(data[1])
adj = [[] for _ in range(n + 1)]
for i in range(m):
    u, v, w = int(data[2 + 3 * i]), int(data[3 + 3 * i]), int(data[4 + 3 * i])
    adj[u].append((v, w))
    adj[v].append((u, w))
inf = float("inf")
d, heaviest = [inf] * (n + 1), [0] * (n + 1)
d[1] = 0
pq = [(0, 1)]
while pq:
    du, u = heapq.heappop(pq)
    if du != d[u]:
        continue
    for v, w in adj[u]:
        if du + w < d[v]:
            d[v] = du + w
            heaviest[v] = max(heaviest[u], w)
            heapq.heappush(pq, (d[v], v))
print(-1 if d[n] == inf else d[n] - heaviest[n])
