# 005-guess-the-height, wrong: the midpoint rounds down, so lo = mid never moves when hi = lo + 1 and the answer
# is yes: it asks the same question until it runs out.
n = int(input())
lo, hi = 1, n
while lo < hi:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    if input().strip() == "yes":
        lo = mid
    else:
        hi = mid - 1
print("!", lo, flush=True)
