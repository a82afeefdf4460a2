# 012-far-away: eccentricity = max distance to the two ends of a diameter (found by two BFS). O(n).
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    adj = [[] for _ in range(n + 1)]
    for u, v in zip(map(int, data[1::2]), map(int, data[2::2])):
        adj[u].append(v)
        adj[v].append(u)

    def bfs(source):
        dist = [-1] * (n + 1)
        dist[source] = 0
        order = [source]
        push = order.append
        for v in order:
            d = dist[v] + 1
            for u in adj[v]:
                if dist[u] < 0:
                    dist[u] = d
                    push(u)
        return dist, order[-1]  # the last vertex reached is a farthest one

    _, a = bfs(1)
    da, b = bfs(a)
    db, _ = bfs(b)
    sys.stdout.write(" ".join(map(str, map(max, da[1:], db[1:]))) + "\n")


main()
