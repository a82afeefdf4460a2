// Climbs from the deeper end one edge at a time: O(depth) per truck, O(n * q) on a long path.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, q;
    scanf("%d %d", &n, &q);
    vector<vector<pair<int, int>>> g(n + 1);
    for (int i = 0; i < n - 1; i++) {
        int u, v, w;
        scanf("%d %d %d", &u, &v, &w);
        g[u].push_back({v, w}); g[v].push_back({u, w});
    }
    vector<int> par(n + 1, 0), pw(n + 1, 0), depth(n + 1, 0), order = {1};
    vector<bool> seen(n + 1); seen[1] = true;
    for (size_t k = 0; k < order.size(); k++)
        for (auto [v, w] : g[order[k]]) if (!seen[v]) {
            seen[v] = true; par[v] = order[k]; pw[v] = w; depth[v] = depth[order[k]] + 1; order.push_back(v);
        }
    while (q--) {
        int a, b, res = INT_MAX;
        scanf("%d %d", &a, &b);
        while (a != b) {
            if (depth[a] < depth[b]) swap(a, b);
            res = min(res, pw[a]); a = par[a];
        }
        printf("%d\n", res);
    }
}
