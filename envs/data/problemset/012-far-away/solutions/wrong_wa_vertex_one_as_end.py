# 012-far-away, wrong: takes village 1 and the village farthest from it as the two ends of a diameter.
import sys

data = sys.stdin.buffer.read().split()
n = int(data[0])
adj = [[] for _ in range(n + 1)]
for i in range(n - 1):
    u, v = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    adj[u].append(v)
    adj[v].append(u)


def bfs(source):
    dist = [-1] * (n + 1)
    dist[source] = 0
    order = [source]
    for v in order:
        for u in adj[v]:
            if dist[u] < 0:
                dist[u] = dist[v] + 1
                order.append(u)
    return dist, order[-1]


d1, a = bfs(1)
da, _ = bfs(a)
print(" ".join(str(max(x, y)) for x, y in zip(d1[1:], da[1:])))
