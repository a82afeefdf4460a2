"""Randomised quicksort: about 1.39 n log2 n weighings on average, far above Q(n)."""
import random
import sys


def lighter(i, j):
    print("?", i, j, flush=True)
    return sys.stdin.readline().strip() == "<"


def quicksort(items):
    if len(items) <= 1:
        return items
    pivot = items[random.randrange(len(items))]
    left, right = [], []
    for x in items:
        if x != pivot:
            (left if lighter(x, pivot) else right).append(x)
    return quicksort(left) + [pivot] + quicksort(right)


random.seed(1)
n = int(sys.stdin.readline())
print("!", *quicksort(list(range(1, n + 1))), flush=True)
