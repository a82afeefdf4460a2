// 015-delivery-routes, too slow: Dijkstra that scans all crossings for the next closest one. O(n^2).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<vector<pair<int, long long>>> adj(n + 1);
    for (int i = 0; i < m; i++) {
        int u, v;
        long long w;
        scanf("%d %d %lld", &u, &v, &w);
        adj[u].push_back({v, w});
        adj[v].push_back({u, w});
    }
    const long long INF = LLONG_MAX;
    vector<long long> dist(n + 1, INF);
    vector<char> done(n + 1, 0);
    dist[1] = 0;
    for (int round = 0; round < n; round++) {
        int v = -1;
        for (int u = 1; u <= n; u++)
            if (!done[u] && (v == -1 || dist[u] < dist[v])) v = u;
        if (dist[v] == INF) break;
        done[v] = 1;
        for (auto [u, w] : adj[v]) dist[u] = min(dist[u], dist[v] + w);
    }
    for (int v = 1; v <= n; v++) printf("%lld%c", dist[v] == INF ? -1 : dist[v], v < n ? ' ' : '\n');
}
