// 008-warehouse-robot, too slow: tries every simple route by backtracking, pruning only routes longer than the
// best found so far. Exponential on an open floor.
#include <bits/stdc++.h>
using namespace std;
int n, m, best = INT_MAX;
vector<string> g;
vector<vector<char>> on_route;
string route, best_route;
const int dr[4] = {-1, 1, 0, 0}, dc[4] = {0, 0, -1, 1};
const char name[4] = {'U', 'D', 'L', 'R'};
void go(int r, int c) {
    if ((int)route.size() >= best) return;
    if (g[r][c] == 'T') { best = route.size(); best_route = route; return; }
    for (int k = 0; k < 4; k++) {
        int nr = r + dr[k], nc = c + dc[k];
        if (nr < 0 || nr >= n || nc < 0 || nc >= m || g[nr][nc] == '#' || on_route[nr][nc]) continue;
        on_route[nr][nc] = 1;
        route += name[k];
        go(nr, nc);
        route.pop_back();
        on_route[nr][nc] = 0;
    }
}
int main() {
    cin >> n >> m;
    g.resize(n);
    for (auto &row : g) cin >> row;
    on_route.assign(n, vector<char>(m, 0));
    for (int r = 0; r < n; r++)
        for (int c = 0; c < m; c++)
            if (g[r][c] == 'S') { on_route[r][c] = 1; go(r, c); }
    if (best == INT_MAX) puts("-1");
    else printf("%d\n%s\n", best, best_route.c_str());
}
