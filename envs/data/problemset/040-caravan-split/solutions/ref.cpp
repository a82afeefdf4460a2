// dp[j][i] = min over p < i of dp[j-1][p] + (S_i - S_p)^2. The cost (S_i - S_p)^2 with positive loads satisfies
// the quadrangle inequality, so the optimal p is monotone in i and each layer is computed by divide and conquer:
// O(k n log n).
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
const ll INF = LLONG_MAX;
int n, k;
vector<ll> S, prv, cur;
void solve(int lo, int hi, int optlo, int opthi) {  // cur[i] for i in [lo, hi], optimal p in [optlo, opthi]
    if (lo > hi) return;
    int mid = (lo + hi) / 2, best = -1;
    ll bestv = INF;
    for (int p = optlo; p <= min(mid - 1, opthi); p++) {
        if (prv[p] == INF) continue;
        ll v = prv[p] + (S[mid] - S[p]) * (S[mid] - S[p]);
        if (v < bestv) { bestv = v; best = p; }
    }
    cur[mid] = bestv;
    if (best < 0) best = optlo;
    solve(lo, mid - 1, optlo, best);
    solve(mid + 1, hi, best, opthi);
}
int main() {
    scanf("%d %d", &n, &k);
    S.assign(n + 1, 0);
    for (int i = 1; i <= n; i++) { ll x; scanf("%lld", &x); S[i] = S[i - 1] + x; }
    prv.assign(n + 1, INF);
    for (int i = 1; i <= n; i++) prv[i] = S[i] * S[i];
    for (int j = 2; j <= k; j++) {
        cur.assign(n + 1, INF);
        solve(j, n, j - 1, n - 1);
        swap(prv, cur);
    }
    printf("%lld\n", prv[n]);
}
