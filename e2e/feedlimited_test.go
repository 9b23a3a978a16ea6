package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/alert/alerttest"
)

// feedOf reads host's feed on GET /api/v1/feeds.
func feedOf(base, host string) (map[string]any, error) {
	resp, err := http.Get(base + "/api/v1/feeds")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct{ Feeds []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	for _, f := range body.Feeds {
		if f["host"] == host {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no feed of %s in %v", host, body.Feeds)
}

// A forge whose rate limit an operator's other uses spent (403, nothing
// remaining, a reset ten minutes ahead) holds its feed back: past
// --fed-max-age the feed is limited (the API, the metric, the alert), and
// its repositories are no longer left to it: a push the held feed cannot
// see is served by the owner's own checks at --max-interval, not a week
// later.
func TestAFeedHeldByARateLimitIsLimitedAndItsRepositoriesPolled(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	hook := alerttest.StartHTTP(t, nil)
	f := newFleet(t)
	repos := seq(0, 2)
	gh := &githubAPI{pushed: map[string]time.Time{}, token: "test-token-1"}
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
		gh.push(f.name(i), time.Now().Add(-time.Hour))
	}
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	f.writeCatalog(repos, "2 repositories on a forge whose limit gets spent")
	host := strings.TrimPrefix(f.up.URL, "http://")
	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--log-level", "debug",
		"--max-interval", "5s", "--min-interval", "1s",
		"--forge", host+"=github,api="+api.URL+"/api", "--forge-token", host+"="+gh.token,
		"--forge-min-ask-interval", "1s", "--fed-max-age", "5s",
		"--alert", hook.URL+"/alerts", "--alert-interval", "500ms", "--alert-for", "1s")
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	eventually(t, 90*time.Second, "the feed working, both repositories fed", func() error {
		// The catalog's missing repository is never answered for: not fed.
		feed, err := feedOf(f.base, host)
		if err != nil {
			return err
		}
		if feed["state"] != "working" || feed["fed"] != 2.0 {
			return fmt.Errorf("feed %v", feed)
		}
		return nil
	})

	gh.setMode("spent", time.Now().Add(10*time.Minute))
	eventually(t, 120*time.Second, "the feed limited, nothing fed", func() error {
		feed, err := feedOf(f.base, host)
		if err != nil {
			return err
		}
		if feed["state"] != "feed-limited" || feed["fed"] != 0.0 {
			return fmt.Errorf("feed %v", feed)
		}
		fams, err := scrape(f.base + "/metrics")
		if err != nil {
			return err
		}
		if v, _ := sample(fams, "gitfleet_forge_feed_limited", "host", host); v != 1 {
			return fmt.Errorf("gitfleet_forge_feed_limited = %v", v)
		}
		if fired, _ := alertsOf(t, hook, "feed-limited"); fired == 0 {
			return fmt.Errorf("no feed-limited alert yet")
		}
		return nil
	})
	if n := gh.spentAsks.Load(); n > 2 {
		t.Errorf("%d requests while the limit was spent, want the one that met it", n)
	}
	// The held feed cannot see this push: the owner's own checks bring it.
	id, err := f.up.Commit(f.name(1), "main")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the push served by polling", func() error {
		got, err := lsRemote(f.base + "/" + f.key(1) + ".git")
		if err != nil {
			return err
		}
		if got["refs/heads/main"] != id {
			return fmt.Errorf("main at %s, want %s", got["refs/heads/main"], id)
		}
		return nil
	})
	if up.count("forge feed stopped: its host's repositories are polled as before") == 0 {
		t.Error("the node was not told the feed stopped")
	}
}
