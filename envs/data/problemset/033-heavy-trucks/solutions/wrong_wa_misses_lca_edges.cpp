// Binary lifting that stops just below the lowest common ancestor and forgets the two last edges into it.
#include <bits/stdc++.h>
using namespace std;
const int LOG = 18;
int main() {
    int n, q;
    scanf("%d %d", &n, &q);
    vector<vector<pair<int, int>>> g(n + 1);
    for (int i = 0; i < n - 1; i++) {
        int u, v, w;
        scanf("%d %d %d", &u, &v, &w);
        g[u].push_back({v, w}); g[v].push_back({u, w});
    }
    vector<array<int, LOG>> up(n + 1), mn(n + 1);
    vector<int> depth(n + 1, 0), order = {1};
    up[1].fill(1); mn[1].fill(INT_MAX);
    vector<bool> seen(n + 1); seen[1] = true;
    for (size_t k = 0; k < order.size(); k++) {
        int u = order[k];
        for (auto [v, w] : g[u]) if (!seen[v]) {
            seen[v] = true; depth[v] = depth[u] + 1; up[v][0] = u; mn[v][0] = w;
            for (int j = 1; j < LOG; j++) {
                up[v][j] = up[up[v][j - 1]][j - 1];
                mn[v][j] = min(mn[v][j - 1], mn[up[v][j - 1]][j - 1]);
            }
            order.push_back(v);
        }
    }
    string outs;
    while (q--) {
        int a, b;
        scanf("%d %d", &a, &b);
        int res = INT_MAX;
        if (depth[a] < depth[b]) swap(a, b);
        for (int j = LOG - 1; j >= 0; j--)
            if (depth[a] - (1 << j) >= depth[b]) { res = min(res, mn[a][j]); a = up[a][j]; }
        if (a != b) {
            for (int j = LOG - 1; j >= 0; j--)
                if (up[a][j] != up[b][j]) { res = min({res, mn[a][j], mn[b][j]}); a = up[a][j]; b = up[b][j]; }
        }
        outs += to_string(res); outs += '\n';
    }
    fputs(outs.c_str(), stdout);
}
