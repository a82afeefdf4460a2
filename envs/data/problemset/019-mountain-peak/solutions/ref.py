# 019-mountain-peak: binary search on the slope (two questions per halving, at most 34).
def ask(i):
    print("?", i, flush=True)
    return int(input())


n = int(input())
lo, hi = 1, n
while lo < hi:
    mid = (lo + hi) // 2
    if ask(mid) < ask(mid + 1):
        lo = mid + 1
    else:
        hi = mid
print("!", lo, flush=True)
