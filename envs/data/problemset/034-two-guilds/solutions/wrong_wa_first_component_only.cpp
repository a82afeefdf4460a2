// Colours only the component of merchant 1 and gives every unreached merchant guild 1: misses odd cycles and
// feuds elsewhere when the city is disconnected.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<vector<int>> g(n + 1);
    for (int i = 0; i < m; i++) { int u, v; scanf("%d %d", &u, &v); g[u].push_back(v); g[v].push_back(u); }
    vector<int> depth(n + 1, -1), par(n + 1, 0), q = {1};
    depth[1] = 0;
    for (size_t k = 0; k < q.size(); k++)
        for (int v : g[q[k]]) if (depth[v] < 0) { depth[v] = depth[q[k]] + 1; par[v] = q[k]; q.push_back(v); }
    for (int u : q) for (int v : g[u]) if (depth[u] % 2 == depth[v] % 2) {
        vector<int> left, right;
        int a = u, b = v;
        while (depth[a] > depth[b]) { left.push_back(a); a = par[a]; }
        while (depth[b] > depth[a]) { right.push_back(b); b = par[b]; }
        while (a != b) { left.push_back(a); a = par[a]; right.push_back(b); b = par[b]; }
        left.push_back(a);
        left.insert(left.end(), right.rbegin(), right.rend());
        printf("NO\n%d\n", (int)left.size());
        for (size_t i = 0; i < left.size(); i++) printf("%d%c", left[i], i + 1 < left.size() ? ' ' : '\n');
        return 0;
    }
    printf("YES\n");
    for (int i = 1; i <= n; i++) printf("%d%c", depth[i] < 0 ? 1 : depth[i] % 2 + 1, i < n ? ' ' : '\n');
}
