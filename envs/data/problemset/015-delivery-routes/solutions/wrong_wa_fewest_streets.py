# 015-delivery-routes, wrong: breadth-first search takes the route with the fewest streets and adds up its times.
import sys

data = sys.stdin.buffer.read().split()
n, m = int(data[0]), int(data[1])
adj = [[] for _ in range(n + 1)]
it = map(int, data[2:2 + 3 * m])
for u, v, w in zip(it, it, it):
    adj[u].append((v, w))
    adj[v].append((u, w))
dist = [-1] * (n + 1)
dist[1] = 0
order = [1]
for v in order:
    for u, w in adj[v]:
        if dist[u] < 0:
            dist[u] = dist[v] + w
            order.append(u)
print(" ".join(map(str, dist[1:])))
