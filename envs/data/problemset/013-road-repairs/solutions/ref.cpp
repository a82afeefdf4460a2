// 013-road-repairs: disjoint-set union (union by size, path compression); a road between two different sets
// lowers the count by one. O(m alpha(n)).
#include <bits/stdc++.h>
using namespace std;
vector<int> parent, sz;
int find(int v) {
    while (parent[v] != v) { parent[v] = parent[parent[v]]; v = parent[v]; }
    return v;
}
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    parent.resize(n + 1);
    sz.assign(n + 1, 1);
    iota(parent.begin(), parent.end(), 0);
    int regions = n;
    string out;
    for (int i = 0; i < m; i++) {
        int u, v;
        scanf("%d %d", &u, &v);
        u = find(u), v = find(v);
        if (u != v) {
            if (sz[u] < sz[v]) swap(u, v);
            parent[v] = u;
            sz[u] += sz[v];
            regions--;
        }
        out += to_string(regions);
        out += '\n';
    }
    fputs(out.c_str(), stdout);
}
