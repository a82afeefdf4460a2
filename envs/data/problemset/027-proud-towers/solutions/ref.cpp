// Merge sort: when merging sorted halves L and R, every r in R is looked down on by the elements of L greater than
// 2r; a pointer over L moves monotonically. O(n log n), 64-bit count (up to n^2 / 4 = 10^10).
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
vector<ll> a, tmp;
ll solve(int lo, int hi) {  // [lo, hi)
    if (hi - lo < 2) return 0;
    int mid = (lo + hi) / 2;
    ll res = solve(lo, mid) + solve(mid, hi);
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
    printf("%lld\n", solve(0, n));
}
