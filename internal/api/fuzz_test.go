package api

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// FuzzWebhookPayload feeds payloadRepos hostile bodies: it must never
// panic, and every repository it names must be a valid key, once, that
// its URL normalises to.
func FuzzWebhookPayload(f *testing.F) {
	for i, h := range hosts {
		files, _ := filepath.Glob(filepath.Join(webhookData, h.name, "*.json"))
		for _, name := range files {
			if data, err := os.ReadFile(name); err == nil {
				f.Add(uint8(i), data)
			}
		}
	}
	f.Add(uint8(0), []byte(`{"repository": {"clone_url": "https://github.com/a/b.git", "ssh_url": "git@github.com:a/b.git"}}`))
	f.Add(uint8(1), []byte(`{"project": {"git_ssh_url": "git@[::1]:a/b.git", "homepage": "http://127.0.0.1:8080/a/b"}, "repository": 7}`))
	f.Add(uint8(2), []byte(`{"repository": {"git_url": "git://gitee.com:oschina/git-osc.git", "url": ["x"]}}`))
	f.Add(uint8(4), []byte(`{"repository": {"clone_url": "ssh://git@localhost:22/-x/../y"}}`))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		host := hosts[int(which)%len(hosts)].name
		opt := repokey.Options{AllowPrivate: which&4 != 0}
		cands, err := payloadRepos(host, body, opt)
		if err != nil {
			return
		}
		seen := map[repokey.Key]bool{}
		for _, c := range cands {
			if err := repokey.Check(c.key.String()); err != nil {
				t.Fatalf("candidate key %q is invalid: %v", c.key, err)
			}
			if key, _, err := repokey.Normalize(c.url, opt); err != nil || key != c.key {
				t.Fatalf("candidate URL %q gives key %q (%v), want %q", c.url, key, err, c.key)
			}
			if seen[c.key] {
				t.Fatalf("key %q named twice", c.key)
			}
			seen[c.key] = true
		}
	})
}
