// Reverse-order DSU that forgets to check whether both ends are already in one zone: a bridge inside a zone
// doubles its size.
#include <bits/stdc++.h>
using namespace std;
vector<int> par, sz;
int find(int x) { while (par[x] != x) x = par[x] = par[par[x]]; return x; }
int best = 1;
void unite(int a, int b) {
    a = find(a); b = find(b);
    if (sz[a] < sz[b]) swap(a, b);
    par[b] = a; sz[a] += sz[b]; best = max(best, sz[a]);
}
int main() {
    int n, m, q;
    scanf("%d %d %d", &n, &m, &q);
    vector<int> u(m + 1), v(m + 1), c(q);
    vector<bool> closed(m + 1);
    for (int i = 1; i <= m; i++) scanf("%d %d", &u[i], &v[i]);
    for (auto& x : c) { scanf("%d", &x); closed[x] = true; }
    par.resize(n + 1); sz.assign(n + 1, 1);
    iota(par.begin(), par.end(), 0);
    for (int i = 1; i <= m; i++) if (!closed[i]) unite(u[i], v[i]);
    vector<int> ans(q);
    for (int j = q - 1; j >= 0; j--) { ans[j] = best; unite(u[c[j]], v[c[j]]); }
    for (int j = 0; j < q; j++) printf("%d%c", ans[j], j + 1 < q ? ' ' : '\n');
}
