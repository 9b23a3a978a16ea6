package repokey

import (
	"strings"
	"testing"
)

func TestFastKeyAgreesWithNormalize(t *testing.T) {
	for _, s := range []string{
		"https://github.com/a/b", "https://github.com/a/b.git", "https://github.com/a/b/", "https://github.com/a/b.git//",
		"https://github.com/a/.git", "https://github.com/a/b.git.git", "https://github.com/a/b.lock", "https://github.com/a//b",
		"https://github.com/", "https://github.com", "https://GitHub.com/a/b", "https://github.com:443/a/b",
		"https://127.0.0.1/a/b", "https://localhost/a/b", "https://x.localhost/a/b", "https://-h.com/a", "https://h.com/-a",
		"https://h.com/a/..", "https://h.com/~user/repo", "https://h.com/a%2Fb", "https://h.com/a////", "https://1.2.3/a",
		"https://h_x.com/a", "https://h.com/a_b/MIT_6.824", "https://h.com/" + strings.Repeat("a", 256),
		"https://h.com/" + strings.Repeat("a/", 300), "https://" + strings.Repeat("h", 254) + ".com/a",
	} {
		checkFastKey(t, s)
	}
}

func checkFastKey(t *testing.T, s string) {
	t.Helper()
	n, ok := fastKey([]byte(s))
	for _, private := range []bool{false, true} {
		key, fetch, err := Normalize(s, Options{AllowPrivate: private})
		if !ok {
			continue // Normalize decides
		}
		if err != nil || key.String() != s[8:8+n] || fetch != s {
			t.Fatalf("fastKey(%q) = %q, but Normalize gives %q %q %v", s, s[8:8+n], key, fetch, err)
		}
	}
}

func FuzzFastKey(f *testing.F) {
	for _, s := range []string{"https://github.com/a/b.git", "https://h.com/a//b/", "https://h.com/.git"} {
		f.Add(s)
	}
	f.Fuzz(checkFastKey)
}

func TestABatchHandsOutItsKeysInOrder(t *testing.T) {
	var b Batch
	lines := []string{"https://github.com/a/b.git", "git@gitee.com:x/Y.git", "https://git.kernel.org/c//", "https://gitlab.gnome.org:8443/d"}
	var want []Key
	for _, l := range lines {
		if _, ok := b.AddFast([]byte(l)); ok {
			want = append(want, Key(strings.TrimSuffix(strings.TrimRight(strings.TrimPrefix(l, "https://"), "/"), ".git")))
			continue
		}
		k, _, err := Normalize(l, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b.Add(k)
		want = append(want, k)
	}
	for round := range 2 { // Keys empties the batch for the next file
		var got []Key
		b.Keys(func(i int, k Key) {
			if i != len(got) {
				t.Errorf("key %d handed out as %d", len(got), i)
			}
			got = append(got, k)
		})
		if round == 0 && strings.Join(keyStrings(got), " ") != strings.Join(keyStrings(want), " ") {
			t.Errorf("keys %q, want %q", got, want)
		}
		if round == 1 && len(got) != 0 {
			t.Errorf("a second Keys handed out %q", got)
		}
	}
}

func keyStrings(ks []Key) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	return out
}
