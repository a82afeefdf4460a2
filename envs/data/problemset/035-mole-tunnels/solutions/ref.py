"""0-1 BFS on the grid (cells numbered r * m + c): entering soil costs 0 (push front), stone costs 1 (push back)."""
import sys
from collections import deque


def main():
    data = sys.stdin.buffer.read().split()
    n, m = int(data[0]), int(data[1])
    stone = [ch == 35 for row in data[2:2 + n] for ch in row]  # 35 == ord("#")
    total = n * m
    dist = [total + 1] * total
    dist[0] = 0
    dq = deque([0])
    pop, push_front, push_back = dq.popleft, dq.appendleft, dq.append
    while dq:
        cell = pop()
        d = dist[cell]
        c = cell % m
        nbrs = []
        if cell >= m:
            nbrs.append(cell - m)
        if cell + m < total:
            nbrs.append(cell + m)
        if c:
            nbrs.append(cell - 1)
        if c + 1 < m:
            nbrs.append(cell + 1)
        for nxt in nbrs:
            if stone[nxt]:
                if d + 1 < dist[nxt]:
                    dist[nxt] = d + 1
                    push_back(nxt)
            elif d < dist[nxt]:
                dist[nxt] = d
                push_front(nxt)
    print(dist[total - 1])


main()
