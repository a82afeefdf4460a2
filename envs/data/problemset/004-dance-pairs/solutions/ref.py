# 004-dance-pairs: sort both sides, two-pointer sweep (see ref.cpp). O(n log n).
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n, m, d = int(data[0]), int(data[1]), int(data[2])
    a = sorted(map(int, data[3:3 + n]))
    b = sorted(map(int, data[3 + n:3 + n + m]))
    i = j = pairs = 0
    while i < n and j < m:
        x, y = a[i], b[j]
        if x - d <= y <= x + d:
            pairs += 1
            i += 1
            j += 1
        elif x < y:
            i += 1
        else:
            j += 1
    print(pairs)


main()
