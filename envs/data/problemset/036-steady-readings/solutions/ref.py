"""Two pointers with monotonic deques for the window maximum and minimum; each right end r adds r - l + 1."""
import sys
from collections import deque


def main():
    data = sys.stdin.buffer.read().split()
    n, k = int(data[0]), int(data[1])
    a = list(map(int, data[2:2 + n]))
    mx, mn = deque(), deque()
    total = l = 0
    for r, x in enumerate(a):
        while mx and a[mx[-1]] <= x:
            mx.pop()
        while mn and a[mn[-1]] >= x:
            mn.pop()
        mx.append(r)
        mn.append(r)
        while a[mx[0]] - a[mn[0]] > k:
            l += 1
            if mx[0] < l:
                mx.popleft()
            if mn[0] < l:
                mn.popleft()
        total += r - l + 1
    print(total)


main()
