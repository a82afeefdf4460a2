// Dijkstra from town 1 and from town n; the answer is min(d1[n], min over roads (u, v) of d1[u] + dn[v]).
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
const ll INF = LLONG_MAX / 4;
int n, m;
vector<vector<pair<int, int>>> g;
vector<ll> dijkstra(int s) {
    vector<ll> d(n + 1, INF);
    priority_queue<pair<ll, int>, vector<pair<ll, int>>, greater<>> pq;
    d[s] = 0; pq.push({0, s});
    while (!pq.empty()) {
        auto [du, u] = pq.top(); pq.pop();
        if (du != d[u]) continue;
        for (auto [v, w] : g[u]) if (du + w < d[v]) { d[v] = du + w; pq.push({d[v], v}); }
    }
    return d;
}
int main() {
    scanf("%d %d", &n, &m);
    g.assign(n + 1, {});
    vector<array<int, 3>> e(m);
    for (auto& [u, v, w] : e) { scanf("%d %d %d", &u, &v, &w); g[u].push_back({v, w}); g[v].push_back({u, w}); }
    auto d1 = dijkstra(1), dn = dijkstra(n);
    ll best = d1[n];
    for (auto& [u, v, w] : e) best = min({best, d1[u] + dn[v], d1[v] + dn[u]});
    printf("%lld\n", best >= INF ? -1 : best);
}
