// 012-far-away: the farthest vertex from any vertex is an end of a diameter. BFS from 1 finds one end a, BFS from
// a finds the other end b; ecc(v) = max(dist(a, v), dist(b, v)). Three BFS, O(n).
#include <bits/stdc++.h>
using namespace std;
int n;
vector<vector<int>> adj;
vector<int> bfs(int source) {
    vector<int> dist(n + 1, -1), order{source};
    dist[source] = 0;
    for (size_t i = 0; i < order.size(); i++)
        for (int u : adj[order[i]])
            if (dist[u] < 0) { dist[u] = dist[order[i]] + 1; order.push_back(u); }
    return dist;
}
int farthest(const vector<int> &dist) { return max_element(dist.begin() + 1, dist.end()) - dist.begin(); }
int main() {
    scanf("%d", &n);
    adj.assign(n + 1, {});
    for (int i = 0; i + 1 < n; i++) {
        int u, v;
        scanf("%d %d", &u, &v);
        adj[u].push_back(v);
        adj[v].push_back(u);
    }
    vector<int> da = bfs(farthest(bfs(1)));
    vector<int> db = bfs(farthest(da));
    string out;
    for (int v = 1; v <= n; v++) out += to_string(max(da[v], db[v])) + (v < n ? " " : "\n");
    fputs(out.c_str(), stdout);
}
