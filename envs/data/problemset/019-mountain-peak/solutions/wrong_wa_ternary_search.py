# 019-mountain-peak, wrong: ternary search keeps two thirds per two questions: about 57 questions for 10^5 posts.
def ask(i):
    print("?", i, flush=True)
    return int(input())


n = int(input())
lo, hi = 1, n
while hi - lo > 2:
    m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
    if ask(m1) < ask(m2):
        lo = m1 + 1
    else:
        hi = m2
best = max(range(lo, hi + 1), key=ask)
print("!", best, flush=True)
