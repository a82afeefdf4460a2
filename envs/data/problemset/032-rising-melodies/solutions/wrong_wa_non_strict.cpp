// Fenwick DP that also extends melodies ending at an equal pitch (counts non-decreasing melodies).
#include <bits/stdc++.h>
using namespace std;
const int MOD = 1000000007;
typedef pair<int, int> P;  // (length, count)
P combine(P a, P b) {
    if (a.first != b.first) return max(a, b);
    return {a.first, (a.second + b.second) % MOD};
}
int main() {
    int n;
    scanf("%d", &n);
    vector<int> a(n);
    for (auto& x : a) scanf("%d", &x);
    vector<int> vals(a);
    sort(vals.begin(), vals.end());
    vals.erase(unique(vals.begin(), vals.end()), vals.end());
    int m = vals.size();
    vector<P> bit(m + 1, {0, 0});
    P total = {0, 0};
    for (int x : a) {
        int pos = lower_bound(vals.begin(), vals.end(), x) - vals.begin() + 1;  // Fenwick position of x
        int r = pos;  // BUG: queries pitches <= x, so equal pitches extend each other
        P best = {0, 1};
        for (int i = r; i > 0; i -= i & -i) best = combine(best, bit[i]);
        if (best.first == 0) best = {0, 1};
        P here = {best.first + 1, best.second};
        total = combine(total, here);
        for (int i = pos; i <= m; i += i & -i) bit[i] = combine(bit[i], here);
    }
    printf("%d\n", total.second);
}
