package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// countingForwarder accepts TCP connections on 127.0.0.1, counts them, and
// carries each to target.
func countingForwarder(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			wg.Go(func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			})
		}
	})
	return ln.Addr().String(), &n
}

// syncLog is a log buffer that the node's goroutines may write at once.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The repair of a corrupt mirror copies it again from its upstream: the
// upstream's URL is checked against the egress policy first, as at every
// fetch, so an upstream the policy refuses is refused as a blocked
// destination before any connection is made (and the broken copy stays
// unserved); allowed, the same repair connects and succeeds.
func TestRepairOfAMirrorWhoseUpstreamTheEgressPolicyRefusesMakesNoConnection(t *testing.T) {
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("c", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	addr, conns := countingForwarder(t, strings.TrimPrefix(up.URL, "http://"))
	url := fmt.Sprintf("http://%s/c.git", addr)
	nk, _, err := repokey.Normalize(url, repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	key := nk.String()
	logs := &syncLog{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	st, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := st.Sync(ctx, repokey.Key(key), url); err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenBolt(filepath.Join(t.TempDir(), "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	n := &Node{log: log, clk: clock.Real{}, mirror: st, db: db, integrity: newIntegrityScan(time.Hour),
		flog: fetchlog.New(db, fetchlog.Config{}, clock.Real{}, log), maint: newMaintainer(1, 1, 7*24*time.Hour),
		owned: map[string]*owned{key: {url: url}}, digests: map[repokey.Key]string{},
		results: map[string]*fleetv1.CheckResult{}, sendNow: make(chan struct{}, 1),
		dialer: egressDialer(Config{})} // the default policy: loopback refused
	n.role = partial{n}
	cause := fmt.Errorf("mirror %s: %w", key, mirror.ErrCorrupt)

	before := conns.Load()
	n.repair(ctx, repokey.Key(key), cause)
	if got := conns.Load() - before; got != 0 {
		t.Fatalf("the refused repair made %d connections", got)
	}
	if s, _ := n.integrity.brokenState(repokey.Key(key)); s != repostate.Corrupt {
		t.Fatalf("after the refused repair the mirror is %q, want %q (not served)", s, repostate.Corrupt)
	}
	if !strings.Contains(logs.String(), "blocked destination") || !strings.Contains(logs.String(), "class="+string(gitcmd.ClassBlocked)) {
		t.Fatalf("the refusal is not logged as a blocked destination:\n%s", logs.String())
	}
	if !st.Has(repokey.Key(key)) {
		t.Fatal("the refused repair removed the mirror")
	}

	n.dialer = egressDialer(Config{AllowPrivate: true})
	n.repair(ctx, repokey.Key(key), cause)
	if conns.Load() == before {
		t.Fatal("the allowed repair made no connection")
	}
	if s, broken := n.integrity.brokenState(repokey.Key(key)); broken {
		t.Fatalf("after the allowed repair the mirror is %q:\n%s", s, logs.String())
	}
}
