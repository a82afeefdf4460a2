"""Sort exams by first day; a min-heap of (last day, hall) frees the hall that ends earliest."""
import heapq
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    ls = list(map(int, data[1:2 * n + 1:2]))
    rs = list(map(int, data[2:2 * n + 2:2]))
    order = sorted(range(n), key=ls.__getitem__)
    busy = []
    hall = [0] * n
    k = 0
    for i in order:
        l = ls[i]
        if busy and busy[0][0] < l:
            h = heapq.heappop(busy)[1]
        else:
            k += 1
            h = k
        hall[i] = h
        heapq.heappush(busy, (rs[i], h))
    sys.stdout.write(f"{k}\n{' '.join(map(str, hall))}\n")


main()
