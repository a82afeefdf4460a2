// Merge sort counting with a 32-bit total: overflows when there are more than 2^31 pairs.
// (the merge itself is right).
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
vector<ll> a, tmp;
int solve(int lo, int hi) {  // [lo, hi)
    if (hi - lo < 2) return 0;
    int mid = (lo + hi) / 2;
    int res = solve(lo, mid) + solve(mid, hi);
    int p = lo;  // first index in L with a[p] > 2 * r
    for (int j = mid; j < hi; j++) {
        while (p < mid && a[p] <= 2 * a[j]) p++;
        res += mid - p;
    }
    merge(a.begin() + lo, a.begin() + mid, a.begin() + mid, a.begin() + hi, tmp.begin() + lo);
    copy(tmp.begin() + lo, tmp.begin() + hi, a.begin() + lo);
    return res;
}
int main() {
    int n;
    scanf("%d", &n);
    a.resize(n); tmp.resize(n);
    for (auto& x : a) scanf("%lld", &x);
    printf("%d\n", solve(0, n));
}
