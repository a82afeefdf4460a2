// BFS 2-colouring of every component. A feud (u, v) inside one colour closes an odd cycle: walk u and v up the
// BFS tree to their lowest common ancestor; the two tree paths plus the edge have du + dv - 2 dl + 1 vertices,
// odd because du and dv have the same parity.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<vector<int>> g(n + 1);
    vector<pair<int, int>> e(m);
    for (auto& [u, v] : e) { scanf("%d %d", &u, &v); g[u].push_back(v); g[v].push_back(u); }
    vector<int> depth(n + 1, -1), par(n + 1, 0);
    for (int s = 1; s <= n; s++) {
        if (depth[s] >= 0) continue;
        depth[s] = 0;
        vector<int> q = {s};
        for (size_t k = 0; k < q.size(); k++)
            for (int v : g[q[k]]) if (depth[v] < 0) { depth[v] = depth[q[k]] + 1; par[v] = q[k]; q.push_back(v); }
    }
    for (auto [u, v] : e) {
        if ((depth[u] - depth[v]) % 2) continue;
        vector<int> left, right;  // u .. lca, v .. (child of lca)
        while (depth[u] > depth[v]) { left.push_back(u); u = par[u]; }
        while (depth[v] > depth[u]) { right.push_back(v); v = par[v]; }
        while (u != v) { left.push_back(u); u = par[u]; right.push_back(v); v = par[v]; }
        left.push_back(u);
        left.insert(left.end(), right.rbegin(), right.rend());
        printf("NO\n%d\n", (int)left.size());
        for (size_t i = 0; i < left.size(); i++) printf("%d%c", left[i], i + 1 < left.size() ? ' ' : '\n');
        return 0;
    }
    printf("YES\n");
    for (int i = 1; i <= n; i++) printf("%d%c", depth[i] % 2 + 1, i < n ? ' ' : '\n');
}
