// Counts h_i >= 2 * h_j (at least twice as tall) instead of strictly more than twice.
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
vector<ll> a, tmp;
ll solve(int lo, int hi) {
    if (hi - lo < 2) return 0;
    int mid = (lo + hi) / 2;
    ll res = solve(lo, mid) + solve(mid, hi);
    int p = lo;
    for (int j = mid; j < hi; j++) {
        while (p < mid && a[p] < 2 * a[j]) p++;
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
