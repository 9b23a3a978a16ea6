package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// pushHook delivers a signed GitHub push webhook for url to the full node.
func pushHook(t *testing.T, base, url, after, delivery string) int {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","after":"%s","repository":{"clone_url":"%s"}}`, after, url))
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write(body)
	req, _ := http.NewRequest("POST", base+"/hooks/github", bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// edgeFleet is apiFleet without background checks during a test: only
// webhooks make the nodes check their upstreams. full are more flags of
// the full node.
func edgeFleet(t *testing.T, repos []int, full ...string) *fleet {
	t.Helper()
	f := newFleet(t)
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(repos, "edge fleet")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	quiet := []string{"--min-interval", "30m", "--max-interval", "1h"}
	f.startNode("full", "full", append([]string{"--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken,
		"--webhook-secret", webhookSecret}, append(quiet, full...)...)...)
	f.startNode("partial-1", "partial", quiet...)
	f.startNode("partial-2", "partial", quiet...)
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	return f
}

func TestPublicEdgeEndToEnd(t *testing.T) {
	// The served tip's grace at 3 s, not its default 30, so that the
	// force-push's case waits out seconds, not half a minute.
	f := edgeFleet(t, []int{0, 1}, "--serve-tip-grace", "3s")

	// The longest case (30 s of pushes at the least, a minute and more on
	// a busy machine): the pacing's figure (a burst of 5, then a check a
	// --webhook-check-spacing) is asserted against pushes a second apart,
	// and a push is a commit made and pushed by git, whose time a busy
	// machine stretches: closer pushes with a shorter spacing would leave
	// the figure to the machine's speed.
	t.Run("30 signed pushes a second apart cost a few upstream checks", func(t *testing.T) {
		name, url := f.name(0), f.up.RepoURL(f.name(0))
		before := f.up.Listings(name)
		var last string
		for i := range 30 {
			id, err := f.up.Commit(name, "main")
			if err != nil {
				t.Fatal(err)
			}
			last = id
			if code := pushHook(t, f.base, url, id, fmt.Sprintf("burst-%d", i)); code != http.StatusAccepted {
				t.Fatalf("push %d: webhook answered %d", i, code)
			}
			time.Sleep(time.Second)
		}
		eventually(t, 60*time.Second, "the last push served", func() error {
			got, err := lsRemote(f.base + "/" + f.key(0) + ".git")
			if err != nil || got["refs/heads/main"] != last {
				return fmt.Errorf("main is %q (%v), want %s", got["refs/heads/main"], err, last)
			}
			return nil
		})
		// A check that finds a change lists the upstream's refs four times:
		// the owner's check, its fetch, its HEAD, and the full node's
		// verification of what it pulls from the owner. A check per push
		// would be about 120 listings, the pacing's 11 to 13 checks about 50.
		listings := f.up.Listings(name) - before
		t.Logf("30 pushes a second apart: %d ref listings of the upstream", listings)
		if listings > 80 {
			t.Fatalf("30 pushes a second apart made %d ref listings of the upstream, want at most 80 (20 checks)", listings)
		}
		// Honest owners racing a stream of pushes are never counted stale.
		for _, name := range []string{"partial-1", "partial-2"} {
			if n := nodeCount(t, f, f.nodeID(name), "stale_reports"); n != 0 {
				t.Errorf("honest node %s: %d stale reports", name, n)
			}
		}
	})

	// A tip the mirror advertised a moment ago is still served for the
	// grace (--serve-tip-grace), for clones that raced the force-push (gitserve's
	// TestACloneRacingAForcePushGetsTheTipItWasAdvertised); past it, never.
	t.Run("a commit force-pushed away is not served by its id once the grace is over", func(t *testing.T) {
		name, url := f.name(1), f.up.RepoURL(f.name(1))
		refs, err := f.up.Refs(name)
		if err != nil {
			t.Fatal(err)
		}
		kept := refs["refs/heads/main"]
		secret, err := f.up.Commit(name, "main")
		if err != nil {
			t.Fatal(err)
		}
		pushHook(t, f.base, url, secret, "leak")
		served := func(want string) func() error {
			return func() error {
				got, err := lsRemote(f.base + "/" + f.key(1) + ".git")
				if err != nil || got["refs/heads/main"] != want {
					return fmt.Errorf("main is %q (%v), want %s", got["refs/heads/main"], err, want)
				}
				return nil
			}
		}
		eventually(t, 60*time.Second, "the leaked commit served", served(secret))
		if err := gittest.Git(filepath.Join(f.up.Dir, name+".git"), "update-ref", "refs/heads/main", kept); err != nil {
			t.Fatal(err)
		}
		pushHook(t, f.base, url, kept, "force-push")
		eventually(t, 60*time.Second, "the force-push served", served(kept))
		fetchByID := func(id string) error {
			dir := t.TempDir()
			if err := gittest.Git(dir, "init", "-q"); err != nil {
				t.Fatal(err)
			}
			return gittest.Git(dir, "-c", "protocol.version=2", "fetch", "-q", f.base+"/"+f.key(1)+".git", id)
		}
		eventually(t, 90*time.Second, "the force-pushed-away commit refused by its id", func() error {
			err := fetchByID(secret)
			if err == nil {
				return errors.New("the mirror still serves a commit that the upstream force-pushed away, by its id")
			}
			if !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "not our ref") {
				t.Fatalf("refused, but not as expected: %v", err)
			}
			return nil
		})
		if err := fetchByID(kept); err != nil {
			t.Fatalf("the served tip, fetched by id: %v", err)
		}
	})
}
