// 011-festival-lights: a set of presses acts as the XOR of the switches' masks (order does not matter, twice is
// nothing), so try all 2^m subsets: mask xor via the subset without its lowest switch. O(2^m).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    char state[32];
    scanf("%d %d %s", &n, &m, state);
    int need = 0;  // lamps that must be toggled an odd number of times
    for (int i = 0; i < n; i++) if (state[i] == '0') need |= 1 << i;
    vector<int> sw(m, 0);
    for (int j = 0; j < m; j++) {
        int c;
        scanf("%d", &c);
        while (c--) { int lamp; scanf("%d", &lamp); sw[j] |= 1 << (lamp - 1); }
    }
    vector<int> toggled(1 << m, 0);
    int best = INT_MAX;
    for (int s = 0; s < (1 << m); s++) {
        if (s) toggled[s] = toggled[s & (s - 1)] ^ sw[__builtin_ctz(s)];
        if (toggled[s] == need) best = min(best, __builtin_popcount(s));
    }
    printf("%d\n", best == INT_MAX ? -1 : best);
}
