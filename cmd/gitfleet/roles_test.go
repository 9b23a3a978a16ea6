package main

import (
	"maps"
	"math"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/forge"
)

func TestParseHostLimits(t *testing.T) {
	got, err := parseHostLimits([]string{"GitHub.com=5000/h", "gitee.com=600"})
	if err != nil || got["github.com"] != 5000 || got["gitee.com"] != 600 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"github.com", "=5/h", "github.com=-1/h", "github.com=many/h"} {
		if _, err := parseHostLimits([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestBulkLoadGCTurnsPacingOffAndRestoresIt(t *testing.T) {
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
	for _, userLimit := range []int64{math.MaxInt64, 100 << 20} {
		debug.SetMemoryLimit(userLimit)
		done := bulkLoadGC()
		wantLimit := userLimit
		if userLimit == math.MaxInt64 {
			wantLimit = bulkLoadCeiling
		}
		if p := debug.SetGCPercent(-1); p != -1 {
			t.Errorf("limit %d: GOGC during a bulk load = %d, want off", userLimit, p)
		}
		if l := debug.SetMemoryLimit(-1); l != wantLimit {
			t.Errorf("limit %d: memory limit during a bulk load = %d, want %d", userLimit, l, wantLimit)
		}
		done()
		if p := debug.SetGCPercent(100); p != 100 {
			t.Errorf("limit %d: GOGC after a bulk load = %d, want 100", userLimit, p)
		}
		if l := debug.SetMemoryLimit(-1); l != userLimit {
			t.Errorf("limit %d: memory limit after a bulk load = %d", userLimit, l)
		}
	}
}

func TestPrepareHeapBacksAShareOfTheLimitAtMost(t *testing.T) {
	limit := debug.SetMemoryLimit(64 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(limit) })
	if got := prepareHeapOnce()(1 << 20); got != 0 {
		t.Errorf("a 1 MB catalog: %d bytes backed, want none (too small to be worth it)", got)
	}
	prepareHeap := prepareHeapOnce()
	got := prepareHeap(1 << 30)
	if got == 0 {
		t.Skipf("this system (%s) cannot prefault", runtime.GOOS)
	}
	if got != 56<<20 {
		t.Errorf("a 1 GB catalog under a 64 MiB limit: %d bytes backed, want 56 MiB", got)
	}
	if again := prepareHeap(1 << 30); again != 0 {
		t.Errorf("a second load in the same process: %d bytes backed, want none", again)
	}
}

// Each forge kind's webhook secret reaches the API under the kind's name,
// beside the secret of every kind; a kind with no secret is left out.
func TestWebhookSecretsReachTheAPIByKind(t *testing.T) {
	args := []string{"--webhook-secret", "every"}
	want := map[string]string{"": "every"}
	skipped := false
	for _, k := range forge.Kinds() {
		if forge.WebhookOf(k) == nil {
			continue
		}
		if !skipped {
			skipped = true // the first kind keeps the shared secret
			continue
		}
		args = append(args, "--webhook-secret-"+string(k), "secret-of-"+string(k))
		want[string(k)] = "secret-of-" + string(k)
	}
	cfg, err := config.Load(config.UpCommand, args)
	if err != nil {
		t.Fatal(err)
	}
	apiCfg, err := apiConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := apiCfg.WebhookSecrets; !maps.Equal(got, want) {
		t.Fatalf("the API's webhook secrets are %q, want %q", got, want)
	}
}
