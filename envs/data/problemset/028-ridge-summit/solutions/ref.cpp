// Binary search for the first point i with a_i > a_{i+1} (the summit): two measurements per halving,
// 2 * ceil(log2(10^6)) = 40 at most.
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
    int lo = 1, hi = n;  // the summit lies in [lo, hi]
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (ask(mid) > ask(mid + 1)) hi = mid; else lo = mid + 1;
    }
    printf("! %d\n", lo);
    fflush(stdout);
}
