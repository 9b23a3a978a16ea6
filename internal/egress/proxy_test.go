package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// fakeDNS is a resolver the test controls: each name answers the next of
// its lists (the last one again when they run out).
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][][]string
	asked   map[string]int
}

func (f *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lists := f.answers[host]
	if len(lists) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(f.asked[host], len(lists)-1)
	f.asked[host]++
	var out []netip.Addr
	for _, a := range lists[i] {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// canary is a listener on a refused address that counts the connections
// it gets: a refused destination must be refused before any connection.
type canary struct {
	ln    net.Listener
	conns atomic.Int64
}

func newCanary(t *testing.T) *canary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2 here: %v", err)
	}
	c := &canary{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.conns.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

func (c *canary) port() string { _, p, _ := net.SplitHostPort(c.ln.Addr().String()); return p }

func (c *canary) untouched(t *testing.T) {
	t.Helper()
	if n := c.conns.Load(); n != 0 {
		t.Errorf("the refused destination got %d connections, want none", n)
	}
}

type fixture struct {
	up     *gittest.Upstreams
	port   string // the upstream's port on 127.0.0.1
	dns    *fakeDNS
	dialer *egress.Dialer
	proxy  *egress.Proxy
	git    *gitcmd.Runner
}

// setup serves a repository "r" on 127.0.0.1, which the policy allows
// (standing for a public address); every other loopback address is refused.
func setup(t *testing.T) *fixture {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("r", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	pol, err := egress.New(egress.Config{Allow: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{up: up, port: u.Port(), dns: &fakeDNS{answers: map[string][][]string{}, asked: map[string]int{}}}
	f.dialer = &egress.Dialer{Policy: pol, Resolver: f.dns}
	if f.proxy, err = egress.NewProxy(f.dialer, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.proxy.Close() })
	f.git = gitcmd.New(gitcmd.Through(f.proxy), gitcmd.Options{Timeout: time.Minute})
	return f
}

func (f *fixture) url(host string) string { return "http://" + host + ":" + f.port + "/r.git" }

func TestGitThroughProxyClonesFetchesAndListsAnAllowedUpstream(t *testing.T) {
	f := setup(t)
	f.dns.answers["git.gitfleet-test.net"] = [][]string{{"127.0.0.1"}}
	ctx := context.Background()
	for _, u := range []string{f.url("127.0.0.1"), f.url("git.gitfleet-test.net")} {
		refs, err := f.git.LsRemote(ctx, u)
		if err != nil || len(refs.Refs) != 3 {
			t.Fatalf("ls-remote %s through the proxy: %v refs, err %v; want 3 refs", u, len(refs.Refs), err)
		}
	}
	dir := filepath.Join(t.TempDir(), "c.git")
	if err := f.git.Run(ctx, gitcmd.Cmd{Name: "clone", Flags: []string{"--bare", "--quiet"}, Args: []string{f.url("git.gitfleet-test.net"), dir}}); err != nil {
		t.Fatalf("clone through the proxy: %v", err)
	}
	want, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "fetch", Flags: []string{"--quiet"},
		Args: []string{f.url("git.gitfleet-test.net"), "+refs/heads/*:refs/heads/*"}}); err != nil {
		t.Fatalf("fetch through the proxy: %v", err)
	}
	got, err := gittest.RefsOf(dir)
	if err != nil || got["refs/heads/main"] != want {
		t.Fatalf("after the fetch main = %q (err %v), want %s", got["refs/heads/main"], err, want)
	}
}

func TestNamesAnsweredInsideAreRefusedBeforeAnyConnection(t *testing.T) {
	f := setup(t)
	c := newCanary(t)
	f.dns.answers["inside.gitfleet-test.net"] = [][]string{{"127.0.0.2"}}
	f.dns.answers["private.gitfleet-test.net"] = [][]string{{"10.20.30.40"}}
	f.dns.answers["mixed.gitfleet-test.net"] = [][]string{{"127.0.0.1", "127.0.0.2"}}
	f.dns.answers["metadata.gitfleet-test.net"] = [][]string{{"169.254.169.254", "fd00::1"}}
	for _, h := range []string{"inside", "private", "mixed", "metadata"} {
		u := "http://" + h + ".gitfleet-test.net:" + c.port() + "/r.git"
		_, err := f.git.LsRemote(context.Background(), u)
		if gitcmd.ClassOf(err) != gitcmd.ClassBlocked || !strings.Contains(err.Error(), "blocked destination") {
			t.Errorf("ls-remote %s = %v (class %s), want class blocked and a blocked destination", u, err, gitcmd.ClassOf(err))
		}
		if strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "unable to access") {
			t.Errorf("ls-remote %s: the error shows git's raw failure: %v", u, err)
		}
	}
	// The same refusal from the dialer itself, for any other client.
	_, err := f.dialer.DialContext(context.Background(), "tcp", "inside.gitfleet-test.net:"+c.port())
	var be *egress.BlockedError
	if !errors.As(err, &be) || !strings.Contains(be.Reason, "loopback") {
		t.Errorf("DialContext to a name answered 127.0.0.2 = %v, want a *BlockedError naming loopback", err)
	}
	c.untouched(t)
}

func TestRebindingLaterAnswerInsideIsRefused(t *testing.T) {
	f := setup(t)
	c := newCanary(t)
	// The same port on both addresses: the first answer reaches the
	// upstream, the later one would reach the canary.
	ln, err := net.Listen("tcp", "127.0.0.2:"+f.port)
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2:%s: %v", f.port, err)
	}
	var rebound atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			rebound.Add(1)
			conn.Close()
		}
	}()
	defer ln.Close()
	f.dns.answers["rebind.gitfleet-test.net"] = [][]string{{"127.0.0.1"}, {"127.0.0.2"}}
	u := f.url("rebind.gitfleet-test.net")
	if _, err := f.git.LsRemote(context.Background(), u); err != nil {
		t.Fatalf("first fetch, answer 127.0.0.1 (allowed): %v", err)
	}
	_, err = f.git.LsRemote(context.Background(), u)
	if gitcmd.ClassOf(err) != gitcmd.ClassBlocked {
		t.Fatalf("second fetch, answer now 127.0.0.2: %v (class %s), want blocked", err, gitcmd.ClassOf(err))
	}
	if n := rebound.Load(); n != 0 {
		t.Errorf("the rebound address got %d connections, want none", n)
	}
	c.untouched(t)
}

func TestRedirectToDeniedAddressIsNotFollowed(t *testing.T) {
	f := setup(t)
	c := newCanary(t)
	target := "http://127.0.0.2:" + c.port() + "/r.git"
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+strings.TrimPrefix(r.URL.Path, "/r.git")+"?"+r.URL.RawQuery, http.StatusFound)
	}))
	defer redirector.Close()
	_, err := f.git.LsRemote(context.Background(), redirector.URL+"/r.git")
	if err == nil {
		t.Fatal("ls-remote of a redirecting upstream succeeded")
	}
	// The proxy hands the 302 back as it is, and refuses the hop if a
	// client follows it.
	env, end := f.proxy.Begin()
	defer end()
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL(t, env))}
	noFollow := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(redirector.URL + "/r.git/info/refs")
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("through the proxy: %v %v, want the upstream's 302 unfollowed", resp, err)
	}
	resp.Body.Close()
	resp, err = (&http.Client{Transport: tr}).Get(redirector.URL + "/r.git/info/refs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "blocked destination") {
		t.Errorf("a client following the redirect: %d %q, want 403 blocked destination", resp.StatusCode, body)
	}
	c.untouched(t)
}

func TestHTTPSThroughConnectAndRefusedConnect(t *testing.T) {
	f := setup(t)
	c := newCanary(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	env, end := f.proxy.Begin()
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL(t, env)),
		TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("https through CONNECT: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("https through CONNECT: body %q", body)
	}
	_, err = client.Get("https://127.0.0.2:" + c.port() + "/")
	if err == nil {
		t.Fatal("CONNECT to 127.0.0.2 succeeded")
	}
	client.CloseIdleConnections()
	if err := end(); !egress.IsBlocked(err) {
		t.Errorf("end of the session = %v, want the refusal of 127.0.0.2", err)
	}
	c.untouched(t)
}

func TestProxyRefusesClientsWithoutTheCredential(t *testing.T) {
	f := setup(t)
	env, end := f.proxy.Begin()
	good := proxyURL(t, env)
	end() // revoked
	for name, u := range map[string]*url.URL{
		"none":    {Scheme: "http", Host: f.proxy.Addr()},
		"wrong":   {Scheme: "http", Host: f.proxy.Addr(), User: url.UserPassword("gitfleet", strings.Repeat("0", 48))},
		"revoked": good,
	} {
		client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
		resp, err := client.Get(f.up.URL + "/r.git/info/refs?service=git-upload-pack")
		if err != nil {
			t.Fatalf("%s credential: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusProxyAuthRequired {
			t.Errorf("%s credential: status %d, want 407", name, resp.StatusCode)
		}
	}
	// A raw CONNECT without a credential, as another local user would try.
	conn, err := net.Dial("tcp", f.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n", f.port, f.port)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("CONNECT without a credential: %v %v, want 407", resp, err)
	}
}

// proxyURL reads the proxy URL (with its credential) out of Begin's environment.
func proxyURL(t *testing.T, env []string) *url.URL {
	t.Helper()
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GIT_CONFIG_VALUE_0="); ok {
			u, err := url.Parse(v)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
	}
	t.Fatalf("no proxy in %q", env)
	return nil
}

// Only a peer's commands (gitcmd.Cmd.Peer) skip the proxy: the same runner
// refuses the same 127.0.0.1 upstream for an upstream-facing command.
func TestPeerCommandsBypassTheProxyAndOthersDoNot(t *testing.T) {
	f := setup(t)
	strict, err := egress.NewProxy(&egress.Dialer{Policy: egress.Default(false)}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	git := gitcmd.New(gitcmd.Through(strict), gitcmd.Options{Timeout: time.Minute})
	if _, err := git.LsRemote(context.Background(), f.url("127.0.0.1")); gitcmd.ClassOf(err) != gitcmd.ClassBlocked {
		t.Errorf("upstream-facing ls-remote of 127.0.0.1 under the default policy: %v, want blocked", err)
	}
	if err := git.Run(context.Background(), gitcmd.Cmd{Name: "ls-remote", Args: []string{f.url("127.0.0.1")}, Peer: true}); err != nil {
		t.Errorf("a peer's ls-remote of 127.0.0.1: %v, want it to bypass the egress proxy", err)
	}
}
