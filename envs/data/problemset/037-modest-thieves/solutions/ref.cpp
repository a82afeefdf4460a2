// Sprague-Grundy. From x coins the moves reach every y with ceil(x / 2) <= y < x. Claim: g(1) = 0, g(2m) = m,
// g(2m + 1) = g(m), and the values of g on the window [m, 2m - 1] are exactly {0, ..., m - 1}. Induction on m:
// x = 2m reaches the window [m, 2m - 1], so g(2m) = mex{0..m-1} = m; x = 2m + 1 reaches [m + 1, 2m], the window
// without m (value g(m) < m) and with 2m (value m), so g(2m + 1) = g(m); and the next window [m + 1, 2m + 1] holds
// {0..m-1} minus g(m), plus m and g(m): {0..m}. Alice wins iff the XOR of the chests' values is non-zero.
#include <bits/stdc++.h>
using namespace std;
typedef unsigned long long ull;
ull grundy(ull x) {
    while (x % 2 == 1 && x > 1) x /= 2;
    return x / 2;
}
int main() {
    int t;
    scanf("%d", &t);
    while (t--) {
        int n;
        scanf("%d", &n);
        ull total = 0;
        for (int i = 0; i < n; i++) { ull x; scanf("%llu", &x); total ^= grundy(x); }
        puts(total ? "Alice" : "Bob");
    }
}
