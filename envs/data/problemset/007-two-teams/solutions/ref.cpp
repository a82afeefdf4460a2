// 007-two-teams: S = n(n+1)/2; the best difference is S mod 2. Take shirts n, n-1, ..., 1 greedily while they fit
// under T = floor(S / 2): every prefix sum gap stays below the next shirt, so the sum reaches exactly T. O(n).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int t;
    scanf("%d", &t);
    string out;
    while (t--) {
        long long n;
        scanf("%lld", &n);
        long long total = n * (n + 1) / 2, target = total / 2, sum = 0;
        vector<long long> team;
        for (long long i = n; i >= 1; i--)
            if (sum + i <= target) { sum += i; team.push_back(i); }
        out += to_string(total % 2) + " " + to_string(team.size()) + "\n";
        for (size_t i = 0; i < team.size(); i++) out += to_string(team[i]) + (i + 1 < team.size() ? " " : "\n");
    }
    fputs(out.c_str(), stdout);
}
