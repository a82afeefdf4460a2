# 018-market-stalls: two pointers with a count per kind. O(n).
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n, k = int(data[0]), int(data[1])
    c = data[2:2 + n]  # kinds compared as byte strings
    count = {}
    left = best = 0
    for right, kind in enumerate(c):
        count[kind] = count.get(kind, 0) + 1
        while len(count) > k:
            gone = c[left]
            left += 1
            if count[gone] == 1:
                del count[gone]
            else:
                count[gone] -= 1
        if right - left + 1 > best:
            best = right - left + 1
    print(best)


main()
