# 005-guess-the-height: binary search for the largest y answered yes (ceil(log2 n) <= 30 questions).
n = int(input())
lo, hi = 1, n
while lo < hi:
    mid = (lo + hi + 1) // 2
    print("?", mid, flush=True)
    if input().strip() == "yes":
        lo = mid
    else:
        hi = mid - 1
print("!", lo, flush=True)
