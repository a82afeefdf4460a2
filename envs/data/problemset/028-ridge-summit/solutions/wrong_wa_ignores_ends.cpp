// Binary search that assumes the summit is strictly inside the ridge: it never answers point n.
#include <bits/stdc++.h>
using namespace std;
long long ask(int i) {
    printf("? %d\n", i);
    fflush(stdout);
    long long x;
    scanf("%lld", &x);
    return x;
}
int main() {
    int n;
    scanf("%d", &n);
    int lo = 1, hi = max(1, n - 1);
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (ask(mid) > ask(mid + 1)) hi = mid; else lo = mid + 1;
    }
    printf("! %d\n", lo);
    fflush(stdout);
}
