// The plain O(k n^2) layer DP.
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
int main() {
    int n, k;
    scanf("%d %d", &n, &k);
    vector<ll> S(n + 1, 0);
    for (int i = 1; i <= n; i++) { ll x; scanf("%lld", &x); S[i] = S[i - 1] + x; }
    const ll INF = LLONG_MAX;
    vector<ll> prv(n + 1, INF), cur(n + 1);
    for (int i = 1; i <= n; i++) prv[i] = S[i] * S[i];
    for (int j = 2; j <= k; j++) {
        fill(cur.begin(), cur.end(), INF);
        for (int i = j; i <= n; i++)
            for (int p = j - 1; p < i; p++)
                if (prv[p] != INF) cur[i] = min(cur[i], prv[p] + (S[i] - S[p]) * (S[i] - S[p]));
        swap(prv, cur);
    }
    printf("%lld\n", prv[n]);
}
