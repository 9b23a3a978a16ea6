package egress_test

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// oneAnswer answers every name at once with the same addresses: the cost
// measured is the policy's, not a DNS server's.
type oneAnswer []netip.Addr

func (r oneAnswer) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) { return r, nil }

// BenchmarkEgressCheck is the egress check's cost per fetch: the URL's
// scheme, host and port (Dialer.CheckURL, before each fetch) and the
// proxy's check of a name's answers (Dialer.Resolve, before its dial).
func BenchmarkEgressCheck(b *testing.B) {
	p, err := egress.New(egress.Config{Allow: []string{"10.1.0.0/16", "*.corp.example"}, Ports: []int{8443}})
	if err != nil {
		b.Fatal(err)
	}
	d := &egress.Dialer{Policy: p, Resolver: oneAnswer{netip.MustParseAddr("140.82.112.3"), netip.MustParseAddr("2606:50c0:8000::154")}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := d.CheckURL(ctx, "https://github.com/torvalds/linux.git"); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Resolve(ctx, "github.com", 443); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLsRemoteThroughProxy runs a real git ls-remote of a 127.0.0.1
// upstream directly and through the egress proxy, alternately in one run,
// and reports both and their ratio.
func BenchmarkLsRemoteThroughProxy(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	if err := up.Create("r", []string{"main", "dev"}, []string{"v1", "v2"}); err != nil {
		b.Fatal(err)
	}
	p, err := egress.New(egress.Config{Allow: []string{"127.0.0.1/32"}})
	if err != nil {
		b.Fatal(err)
	}
	proxy, err := egress.NewProxy(&egress.Dialer{Policy: p}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	direct := gitcmd.New(gitcmd.Direct(), gitcmd.Options{Timeout: time.Minute})
	proxied := gitcmd.New(gitcmd.Through(proxy), gitcmd.Options{Timeout: time.Minute})
	ctx := context.Background()
	url := up.RepoURL("r")
	var tDirect, tProxied time.Duration
	n := 0
	for b.Loop() {
		for _, r := range []struct {
			git *gitcmd.Runner
			sum *time.Duration
		}{{direct, &tDirect}, {proxied, &tProxied}} {
			start := time.Now()
			if _, err := r.git.LsRemote(ctx, url); err != nil {
				b.Fatal(err)
			}
			*r.sum += time.Since(start)
		}
		n++
	}
	b.ReportMetric(float64(tDirect.Microseconds())/float64(n)/1000, "direct-ms")
	b.ReportMetric(float64(tProxied.Microseconds())/float64(n)/1000, "proxied-ms")
	b.ReportMetric(float64(tProxied)/float64(tDirect), "ratio")
}
