// 015-delivery-routes: Dijkstra's algorithm with a binary heap, 64-bit times (up to 2*10^5 * 10^9).
// O((n + m) log m).
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
    vector<long long> dist(n + 1, -1);
    priority_queue<pair<long long, int>, vector<pair<long long, int>>, greater<>> heap;
    heap.push({0, 1});
    while (!heap.empty()) {
        auto [d, v] = heap.top();
        heap.pop();
        if (dist[v] != -1) continue;
        dist[v] = d;
        for (auto [u, w] : adj[v])
            if (dist[u] == -1) heap.push({d + w, u});
    }
    string out;
    for (int v = 1; v <= n; v++) out += to_string(dist[v]) + (v < n ? " " : "\n");
    fputs(out.c_str(), stdout);
}
