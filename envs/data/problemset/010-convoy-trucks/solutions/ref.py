# 010-convoy-trucks: binary search on the capacity; greedy filling decides feasibility. The answer lies in
# [max(max w, ceil(S / k)), that + max w] (greedy with ceil(S / k) + max w never needs more than k trucks).
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n, k = int(data[0]), int(data[1])
    w = list(map(int, data[2:2 + n]))
    biggest, total = max(w), sum(w)
    lo = max(biggest, -(-total // k))
    hi = lo + biggest
    while lo < hi:
        cap = (lo + hi) // 2
        trucks, load = 1, 0
        for x in w:
            load += x
            if load > cap:
                trucks += 1
                load = x
        if trucks <= k:
            hi = cap
        else:
            lo = cap + 1
    print(lo)


main()
