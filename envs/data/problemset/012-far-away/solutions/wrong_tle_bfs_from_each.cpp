// 012-far-away, too slow: a BFS from every village. O(n^2).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    vector<vector<int>> adj(n + 1);
    for (int i = 0; i + 1 < n; i++) {
        int u, v;
        scanf("%d %d", &u, &v);
        adj[u].push_back(v);
        adj[v].push_back(u);
    }
    vector<int> dist(n + 1), order;
    for (int s = 1; s <= n; s++) {
        fill(dist.begin(), dist.end(), -1);
        order.assign(1, s);
        dist[s] = 0;
        for (size_t i = 0; i < order.size(); i++)
            for (int u : adj[order[i]])
                if (dist[u] < 0) { dist[u] = dist[order[i]] + 1; order.push_back(u); }
        printf("%d%c", dist[order.back()], s < n ? ' ' : '\n');
    }
}
