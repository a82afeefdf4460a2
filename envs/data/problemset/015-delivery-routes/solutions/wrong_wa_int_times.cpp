// 015-delivery-routes, wrong: times kept in int; long routes of heavy streets overflow.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<vector<pair<int, int>>> adj(n + 1);
    for (int i = 0; i < m; i++) {
        int u, v, w;
        scanf("%d %d %d", &u, &v, &w);
        adj[u].push_back({v, w});
        adj[v].push_back({u, w});
    }
    vector<int> dist(n + 1, -1);
    priority_queue<pair<int, int>, vector<pair<int, int>>, greater<>> heap;
    heap.push({0, 1});
    while (!heap.empty()) {
        auto [d, v] = heap.top();
        heap.pop();
        if (dist[v] != -1) continue;
        dist[v] = d;
        for (auto [u, w] : adj[v])
            if (dist[u] == -1) heap.push({d + w, u});
    }
    for (int v = 1; v <= n; v++) printf("%d%c", dist[v], v < n ? ' ' : '\n');
}
