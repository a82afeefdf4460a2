// Walks the whole tree from every village: O(n^2), too slow for n = 2 * 10^5.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    vector<vector<pair<int, int>>> g(n + 1);
    for (int i = 0; i < n - 1; i++) {
        int u, v, w;
        scanf("%d %d %d", &u, &v, &w);
        g[u].push_back({v, w}); g[v].push_back({u, w});
    }
    vector<long long> d(n + 1);
    vector<int> st, par(n + 1);
    for (int x = 1; x <= n; x++) {
        long long total = 0;
        st = {x}; d[x] = 0; par[x] = 0;
        while (!st.empty()) {
            int u = st.back(); st.pop_back(); total += d[u];
            for (auto [v, w] : g[u]) if (v != par[u]) { par[v] = u; d[v] = d[u] + w; st.push_back(v); }
        }
        printf("%lld%c", total, x < n ? ' ' : '\n');
    }
}
