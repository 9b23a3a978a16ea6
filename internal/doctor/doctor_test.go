package doctor

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/coordinator"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/testnet"
	"github.com/gitfleet/gitfleet/internal/tlsconf"
)

func statusOf(t *testing.T, rs []Result, check string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Check == check {
			return r
		}
	}
	t.Fatalf("no %q among %+v", check, rs)
	return Result{}
}

func TestJudgeGitNamesEveryMissingFeature(t *testing.T) {
	for _, c := range []struct {
		v    gitcmd.Version
		fail []string
		warn []string
	}{
		{gitcmd.Version{Major: 2, Minor: 52}, nil, nil},
		{gitcmd.Version{Major: 3, Minor: 0}, nil, nil},
		{gitcmd.Version{Major: 2, Minor: 51, Patch: 9}, nil, []string{"git duplicate haves"}},
		{gitcmd.Version{Major: 2, Minor: 43}, nil, []string{"git duplicate haves"}},
		{gitcmd.Version{Major: 2, Minor: 39, Patch: 5}, nil, []string{"git core.maxTreeDepth", "git duplicate haves"}},
		{gitcmd.Version{Major: 2, Minor: 30}, []string{"git GIT_CONFIG_COUNT"}, []string{"git core.maxTreeDepth", "git duplicate haves"}},
		{gitcmd.Version{Major: 2, Minor: 28}, []string{"git fetch --stdin", "git negative refspecs", "git GIT_CONFIG_COUNT"}, []string{"git core.maxTreeDepth", "git duplicate haves"}},
		{gitcmd.Version{Major: 2, Minor: 17}, []string{"git protocol v2", "git fetch --stdin", "git negative refspecs", "git GIT_CONFIG_COUNT"}, []string{"git core.maxTreeDepth", "git duplicate haves"}},
	} {
		var fail, warn []string
		for _, r := range JudgeGit(c.v) {
			switch r.Status {
			case Fail:
				fail = append(fail, r.Check)
			case Warn:
				warn = append(warn, r.Check)
			}
			if r.Status != OK && r.Fix == "" {
				t.Errorf("%v: %s has no fix", c.v, r.Check)
			}
		}
		if strings.Join(fail, ",") != strings.Join(c.fail, ",") || strings.Join(warn, ",") != strings.Join(c.warn, ",") {
			t.Errorf("git %v: fail %v warn %v; want fail %v warn %v", c.v, fail, warn, c.fail, c.warn)
		}
	}
}

func TestJudgeSkewAndDisk(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for skew, want := range map[time.Duration]Status{0: OK, 2 * time.Second: OK, -10 * time.Second: Warn, 2 * time.Minute: Fail, -time.Hour: Fail} {
		date := now.Add(-skew).Format(http.TimeFormat)
		if got := JudgeSkew("peer", date, now.Add(-50*time.Millisecond), now.Add(50*time.Millisecond)); got.Status != want {
			t.Errorf("skew %v: %v (%s); want %v", skew, got.Status, got.Detail, want)
		}
	}
	if got := JudgeSkew("peer", "", now, now); got.Status != Warn {
		t.Errorf("no Date: %v", got.Status)
	}
	const gib = 1 << 30
	for _, c := range []struct {
		free, total uint64
		want        Status
	}{{500 * gib, 1000 * gib, OK}, {5 * gib, 20 * gib, Warn}, {20 * gib, 1000 * gib, Fail}, {gib / 2, 2 * gib, Fail}, {100 * gib, 200 * gib, OK}} {
		if got := JudgeDisk("d", c.free, c.total); got.Status != c.want {
			t.Errorf("disk %d/%d: %v; want %v", c.free, c.total, got.Status, c.want)
		}
	}
}

func TestJudgeTokensByRole(t *testing.T) {
	count := func(rs []Result, s Status) (n int) {
		for _, r := range rs {
			if r.Status == s {
				n++
			}
		}
		return n
	}
	if rs := JudgeTokens(Partial, "", "", false); count(rs, Fail) != 1 {
		t.Errorf("partial without join token: %+v", rs)
	}
	if rs := JudgeTokens(Partial, "", "", true); count(rs, Fail)+count(rs, Warn) != 0 {
		t.Errorf("registered partial without join token: %+v", rs)
	}
	if rs := JudgeTokens(Full, "", "", true); count(rs, Fail) != 1 {
		t.Errorf("registered full node without full token: %+v", rs)
	}
	if rs := JudgeTokens(Partial, "j", "", false); count(rs, Fail)+count(rs, Warn) != 0 {
		t.Errorf("partial with join token: %+v", rs)
	}
	if rs := JudgeTokens(Full, "j", "", false); count(rs, Fail) != 1 || statusOf(t, rs, "token full-token").Status != Fail {
		t.Errorf("full without full token: %+v", rs)
	}
	if rs := JudgeTokens(Full, "", "f", false); count(rs, Fail) != 0 {
		t.Errorf("full with full token: %+v", rs)
	}
	if rs := JudgeTokens(Coordinator, "", "f", false); count(rs, Fail) != 1 || statusOf(t, rs, "token join-token").Status != Fail {
		t.Errorf("coordinator without join token: %+v", rs)
	}
	if rs := JudgeTokens(Coordinator, "j", "", false); count(rs, Fail) != 1 || statusOf(t, rs, "token full-token").Status != Fail {
		t.Errorf("coordinator without full token: %+v", rs)
	}
	// up makes both tokens itself, unless it shares a fleet through etcd.
	if rs := JudgeUpTokens("", "", false); count(rs, Fail)+count(rs, Warn) != 0 || len(rs) != 2 {
		t.Errorf("up without tokens: %+v", rs)
	}
	if rs := JudgeUpTokens("", "", true); count(rs, Fail) != 2 {
		t.Errorf("up with --etcd without tokens: %+v", rs)
	}
	if rs := JudgeUpTokens("j", "f", true); count(rs, Fail)+count(rs, Warn) != 0 {
		t.Errorf("up with --etcd and both tokens: %+v", rs)
	}
}

// doctor up and doctor coordinator read the catalog as its first fetch
// would, and say why one cannot be read.
func TestTheCatalogIsCheckedForTheCoordinatorAndUp(t *testing.T) {
	ctx := context.Background()
	catalog := filepath.Join(t.TempDir(), "catalog")
	if err := gittest.Git("", "init", "-q", "-b", "main", catalog); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(catalog, "a.list"), []byte("https://example.org/a/b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "catalog"}} {
		if err := gittest.Git(catalog, args...); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(t.TempDir(), "no-catalog")
	for _, tc := range []struct {
		role    Role
		catalog string
		want    Status
	}{
		{Up, catalog, OK}, {Coordinator, catalog, OK},
		{Up, missing, Fail}, {Coordinator, missing, Fail}, {Up, "", Fail},
		{Up, t.TempDir(), Fail}, // a directory that is not a repository
	} {
		rs := Run(ctx, Options{Role: tc.role, Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Data: t.TempDir(), Catalog: tc.catalog, Timeout: 5 * time.Second})
		r := statusOf(t, rs, "catalog")
		if r.Status != tc.want || tc.catalog != "" && !strings.Contains(r.Detail, tc.catalog) {
			t.Errorf("%s --catalog %q: %v %s", tc.role, tc.catalog, r.Status, r.Detail)
		}
		for _, c := range []string{"token join-token", "token full-token"} {
			if r := statusOf(t, rs, c); tc.role == Up && r.Status != OK {
				t.Errorf("up: %s %v %s: up makes it itself", c, r.Status, r.Detail)
			}
		}
	}
	for _, role := range []Role{Partial, Full} {
		for _, r := range Run(ctx, Options{Role: role, Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Data: t.TempDir(), Catalog: missing, Timeout: 5 * time.Second}) {
			if r.Check == "catalog" {
				t.Errorf("%s: the catalog is checked: %+v", role, r)
			}
		}
	}
}

// writeCert writes a certificate for 127.0.0.1, self-signed (a CA), valid
// from notBefore to notAfter, and its key.
func writeCert(t *testing.T, dir, name string, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// skewedServer is a full node's /healthz on 127.0.0.1 whose Date header is
// off by skew.
func skewedServer(t *testing.T, skew time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", testnet.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Date", time.Now().Add(skew).UTC().Format(http.TimeFormat))
		w.Write([]byte("ok\n"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// realCoordinator serves a real coordinator on 127.0.0.1 (TLS when conf is
// not nil); its catalog is an absent path: nothing is fetched.
func realCoordinator(t *testing.T, conf *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", testnet.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- coordinator.Serve(ctx, coordinator.Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), CatalogInterval: time.Hour,
			JoinToken: "j", FullToken: "f", TLS: conf}, slog.New(slog.DiscardHandler), ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	return ln.Addr().String()
}

func TestRunAgainstRealServers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Now()
	cert, key := writeCert(t, dir, "coord", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	serverConf, err := tlsconf.Server(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	coord := realCoordinator(t, serverConf)
	plain := realCoordinator(t, nil)
	closed := testnet.Addr(t) // handed out, never bound

	t.Run("healthy", func(t *testing.T) {
		o := Options{Role: Full, Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Data: filepath.Join(dir, "data"),
			Coordinators: []string{coord}, TLS: true, TLSCA: cert, TLSCert: cert, TLSKey: key,
			Server: skewedServer(t, 0), JoinToken: "j", FullToken: "f", Clock: clock.Real{}, Timeout: 20 * time.Second}
		rs := Run(ctx, o)
		var buf bytes.Buffer
		failed := Print(&buf, rs)
		t.Log("\n" + buf.String())
		for _, c := range []string{"coordinator", "full node http", "clock skew", "tls files", "tls ca", "data writable", "git GIT_CONFIG_COUNT", "token full-token"} {
			if r := statusOf(t, rs, c); r.Status != OK {
				t.Errorf("%s: %v %s", c, r.Status, r.Detail)
			}
		}
		if r := statusOf(t, rs, "coordinator"); !strings.Contains(r.Detail, "TLS handshake ok, answers gRPC") {
			t.Errorf("coordinator: %s", r.Detail)
		}
		// The disk of this machine may be full: only a failure there may fail the run.
		if failed && statusOf(t, rs, "disk").Status != Fail {
			t.Errorf("failed with everything in order")
		}
	})

	t.Run("broken", func(t *testing.T) {
		otherCert, _ := writeCert(t, dir, "other", now.Add(-time.Hour), now.Add(time.Hour))
		_, otherKey := writeCert(t, dir, "third", now.Add(-time.Hour), now.Add(time.Hour))
		o := Options{Role: Partial, Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Data: filepath.Join(dir, "data"),
			// A closed port, and a coordinator whose certificate --tls-ca does not sign.
			Coordinators: []string{closed, coord}, TLSCA: otherCert,
			TLSCert: otherCert, TLSKey: otherKey, // a key of another certificate
			Server: skewedServer(t, -3*time.Minute), Clock: clock.Real{}, Timeout: 20 * time.Second}
		rs := Run(ctx, o)
		var buf bytes.Buffer
		if !Print(&buf, rs) {
			t.Errorf("nothing failed")
		}
		t.Log("\n" + buf.String())
		var coordinators []Result
		for _, r := range rs {
			if r.Check == "coordinator" {
				coordinators = append(coordinators, r)
			}
		}
		if len(coordinators) != 2 || coordinators[0].Status != Fail || coordinators[1].Status != Fail ||
			!strings.Contains(coordinators[1].Detail, "TLS handshake") {
			t.Errorf("coordinators: %+v", coordinators)
		}
		for _, c := range []string{"clock skew", "tls files", "token join-token"} {
			if r := statusOf(t, rs, c); r.Status != Fail {
				t.Errorf("%s: %v %s", c, r.Status, r.Detail)
			}
		}
		if r := statusOf(t, rs, "full node http"); r.Status != OK {
			t.Errorf("full node http: %v %s", r.Status, r.Detail)
		}
		if !strings.Contains(buf.String(), "-- run NTP") {
			t.Errorf("no fix printed:\n%s", buf.String())
		}
	})

	t.Run("tls or not", func(t *testing.T) {
		// Plain gRPC to a TLS coordinator fails after the dial; plain to plain answers.
		rs := Run(ctx, Options{Role: Partial, Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Data: dir, Coordinators: []string{coord, plain},
			JoinToken: "j", Clock: clock.Real{}, Timeout: 20 * time.Second})
		var got []Result
		for _, r := range rs {
			if r.Check == "coordinator" {
				got = append(got, r)
			}
		}
		if len(got) != 2 || got[0].Status != Fail || !strings.Contains(got[0].Detail, "no gRPC answer") || !strings.Contains(got[0].Fix, "the coordinator speaks TLS: add --tls (or --tls-ca FILE)") ||
			got[1].Status != OK || !strings.Contains(got[1].Detail, "(plain TCP), answers gRPC") {
			t.Errorf("coordinators: %+v", got)
		}
	})

	t.Run("unreachable server and unwritable data", func(t *testing.T) {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(ro, 0o700) })
		o := Options{Role: Coordinator, Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Data: filepath.Join(ro, "data"),
			Server: "http://" + closed, FullToken: "f", JoinToken: "j", Clock: clock.Real{}, Timeout: 20 * time.Second}
		rs := Run(ctx, o)
		if r := statusOf(t, rs, "full node http"); r.Status != Fail {
			t.Errorf("closed port: %v %s", r.Status, r.Detail)
		}
		for _, r := range rs {
			if r.Check == "clock skew" || r.Check == "coordinator" {
				t.Errorf("unexpected %+v", r)
			}
		}
		file := filepath.Join(dir, "a-file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if r := statusOf(t, checkData(file), "data writable"); r.Status != Fail {
			t.Errorf("a file as --data: %v %s", r.Status, r.Detail)
		}
		f, err := os.CreateTemp(ro, "x")
		if err == nil { // root writes anywhere: the check cannot fail here
			f.Close()
			t.Skip("running as a user who writes in a read-only directory")
		}
		if r := statusOf(t, rs, "data writable"); r.Status != Fail {
			t.Errorf("read-only parent: %v %s", r.Status, r.Detail)
		}
	})
}

func TestExpiringCertificates(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, c := range []struct {
		nb, na time.Time
		want   Status
	}{{now.Add(-day), now.Add(90 * day), OK}, {now.Add(-day), now.Add(3 * day), Warn}, {now.Add(-90 * day), now.Add(-day), Fail}, {now.Add(day), now.Add(90 * day), Fail}} {
		if got := JudgeCertificate("c.pem", c.nb, c.na, now); got.Status != c.want {
			t.Errorf("%v..%v: %v (%s); want %v", c.nb, c.na, got.Status, got.Detail, c.want)
		}
	}
}

func TestRegisteredPartialNodeNeedsNoJoinToken(t *testing.T) {
	data := t.TempDir()
	o := Options{Role: Partial, Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Data: data, Clock: clock.Real{}}
	if r := statusOf(t, Run(context.Background(), o), "token join-token"); r.Status != Fail {
		t.Fatalf("unregistered: %+v", r)
	}
	if err := os.WriteFile(filepath.Join(data, identityFile), []byte(`{"node_id":7,"secret":"s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := statusOf(t, Run(context.Background(), o), "token join-token"); r.Status != OK {
		t.Errorf("registered: %+v", r)
	}
}

func TestJudgeCaseWarnsOfAFileSystemThatFoldsCase(t *testing.T) {
	if r := JudgeCase("/d", true); r.Status != Warn || !strings.Contains(r.Detail, "case-insensitive") {
		t.Fatalf("folding: %+v", r)
	}
	if r := JudgeCase("/d", false); r.Status != OK {
		t.Fatalf("sensitive: %+v", r)
	}
}

// git before 2.52 keeps every duplicate "have" of a fetch request: the
// warning says which git to install.
func TestJudgeGitWarnsOfUnboundedDuplicateHavesBefore252(t *testing.T) {
	for _, r := range JudgeGit(gitcmd.Version{Major: 2, Minor: 39, Patch: 5}) {
		if r.Check != "git duplicate haves" {
			continue
		}
		if r.Status != Warn || !strings.Contains(r.Fix, "install git 2.52 or later") || !strings.Contains(r.Detail, "2.39.5") {
			t.Fatalf("git 2.39.5: %+v; want a warning whose fix says to install git 2.52 or later", r)
		}
		return
	}
	t.Fatal("git 2.39.5: no duplicate haves check")
}
