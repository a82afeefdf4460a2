# 015-delivery-routes: Dijkstra with heapq (lazy deletion); a heap entry is the integer time * 2^18 + crossing,
# cheaper to compare than a tuple. O((n + m) log m).
import sys
from heapq import heappop, heappush

SHIFT = 18  # 2^18 > 2 * 10^5 crossings


def main():
    data = sys.stdin.buffer.read().split()
    n, m = int(data[0]), int(data[1])
    adj = [[] for _ in range(n + 1)]
    it = map(int, data[2:2 + 3 * m])
    for u, v, w in zip(it, it, it):
        adj[u].append((v, w << SHIFT))
        adj[v].append((u, w << SHIFT))
    dist = [-1] * (n + 1)
    heap = [1]
    mask = (1 << SHIFT) - 1
    while heap:
        entry = heappop(heap)
        v = entry & mask
        if dist[v] >= 0:
            continue
        d = entry - v
        dist[v] = d >> SHIFT
        for u, w in adj[v]:
            if dist[u] < 0:
                heappush(heap, d + w + u)
    sys.stdout.write(" ".join(map(str, dist[1:])) + "\n")


main()
