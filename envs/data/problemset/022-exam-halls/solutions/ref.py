"""Sort exams by first day; a min-heap of busy halls (packed as last_day * 2^18 + hall, so the heap compares plain
integers) frees the hall that ends earliest."""
import heapq
import sys

SHIFT = 18  # halls <= 2 * 10^5 < 2^18
MASK = (1 << SHIFT) - 1


def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    ls = list(map(int, data[1:2 * n + 1:2]))
    rs = list(map(int, data[2:2 * n + 2:2]))
    busy = []
    push, pop = heapq.heappush, heapq.heappop
    hall = [0] * n
    k = 0
    for i in sorted(range(n), key=ls.__getitem__):
        if busy and busy[0] >> SHIFT < ls[i]:
            h = pop(busy) & MASK
        else:
            k += 1
            h = k
        hall[i] = h
        push(busy, (rs[i] << SHIFT) | h)
    sys.stdout.write(f"{k}\n{' '.join(map(str, hall))}\n")


main()
