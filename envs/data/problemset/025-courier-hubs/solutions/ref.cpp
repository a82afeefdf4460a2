// Rerooting: S(root) from subtree sizes; moving the root across edge (p, c) of weight w changes the sum by
// w * (n - 2 * size(c)).
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
    vector<int> order, par(n + 1, 0), pw(n + 1, 0);
    vector<long long> sz(n + 1, 1), S(n + 1, 0);
    order.reserve(n); order.push_back(1); par[1] = -1;
    for (size_t k = 0; k < order.size(); k++) {
        int u = order[k];
        for (auto [v, w] : g[u]) if (v != par[u]) { par[v] = u; pw[v] = w; order.push_back(v); }
    }
    long long root = 0;
    vector<long long> depth(n + 1, 0);
    for (int k = 1; k < n; k++) { int v = order[k]; depth[v] = depth[par[v]] + pw[v]; root += depth[v]; }
    for (int k = n - 1; k > 0; k--) sz[par[order[k]]] += sz[order[k]];
    S[1] = root;
    for (int k = 1; k < n; k++) { int v = order[k]; S[v] = S[par[v]] + (long long)pw[v] * (n - 2 * sz[v]); }
    for (int i = 1; i <= n; i++) printf("%lld%c", S[i], i < n ? ' ' : '\n');
}
