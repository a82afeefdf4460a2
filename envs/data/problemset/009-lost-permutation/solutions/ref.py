# 009-lost-permutation: p1 from the sums of (1,2), (1,3), (2,3); then p_i = (p1 + p_i) - p1: n questions.
def ask(i, j):
    print("?", i, j, flush=True)
    return int(input())


n = int(input())
s12, s13, s23 = ask(1, 2), ask(1, 3), ask(2, 3)
p1 = (s12 + s13 - s23) // 2
p = [p1, s12 - p1, s13 - p1] + [ask(1, i) - p1 for i in range(4, n + 1)]
print("!", *p, flush=True)
