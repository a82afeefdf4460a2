// Suffix automaton of s; walk t through it keeping the longest suffix of t[0..i] that occurs in s (follow suffix
// links on a mismatch). The best length and where it ends in t give the answer. O((|s| + |t|) * 26).
#include <bits/stdc++.h>
using namespace std;
struct State { int len, link; int next[26]; };
vector<State> st;
int last_;
void extend(int c) {
    int cur = st.size();
    st.push_back({st[last_].len + 1, -1, {}});
    memset(st[cur].next, -1, sizeof st[cur].next);
    int p = last_;
    while (p != -1 && st[p].next[c] == -1) { st[p].next[c] = cur; p = st[p].link; }
    if (p == -1) st[cur].link = 0;
    else {
        int q = st[p].next[c];
        if (st[p].len + 1 == st[q].len) st[cur].link = q;
        else {
            int clone = st.size();
            st.push_back(st[q]);
            st[clone].len = st[p].len + 1;
            while (p != -1 && st[p].next[c] == q) { st[p].next[c] = clone; p = st[p].link; }
            st[q].link = st[cur].link = clone;
        }
    }
    last_ = cur;
}
int main() {
    static char a[200005], b[200005];
    scanf("%s %s", a, b);
    string s = a, t = b;
    st.reserve(2 * s.size() + 2);
    st.push_back({0, -1, {}});
    memset(st[0].next, -1, sizeof st[0].next);
    last_ = 0;
    for (char ch : s) extend(ch - 'a');
    int v = 0, len = 0, best = 0, bestEnd = 0;
    for (int i = 0; i < (int)t.size(); i++) {
        int c = t[i] - 'a';
        while (v != 0 && st[v].next[c] == -1) { v = st[v].link; len = st[v].len; }
        if (st[v].next[c] != -1) { v = st[v].next[c]; len++; } else { v = 0; len = 0; }
        if (len > best) { best = len; bestEnd = i; }
    }
    printf("%d\n", best);
    if (best > 0) printf("%s\n", t.substr(bestEnd - best + 1, best).c_str());
}
