package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/tlsconf"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Options are what Run checks.
type Options struct {
	Role Role
	// Git runs git (for its version).
	Git *gitcmd.Runner
	// Data is the data directory.
	Data string
	// Coordinators are the coordinators' gRPC addresses (host:port), which
	// nodes dial; TLS and TLSCA as the node would dial them.
	Coordinators []string
	TLS          bool
	TLSCA        string
	// TLSCert and TLSKey are the listeners' certificate and key.
	TLSCert, TLSKey string
	// Server is the full node's HTTP base URL (empty: not checked).
	Server string
	// Catalog is the catalog repository (a URL or a path) of a coordinator
	// or of up; Shared tells that up shares a fleet through etcd.
	Catalog              string
	Shared               bool
	JoinToken, FullToken string
	Clock                clock.Clock
	// Timeout bounds each network check.
	Timeout time.Duration
}

// FromConfig returns the options of a role's configuration. server is the
// full node's URL; empty, a full node's own --public-url or --http is used.
func FromConfig(cfg config.Config, role Role, server string) Options {
	if server == "" && (role == Full || role == Up) {
		server = cfg.PublicURL
		if server == "" && cfg.HTTP != "" {
			server = "http://" + cfg.HTTP
		}
	}
	o := Options{
		Role: role, Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{Timeout: 30 * time.Second}), Data: cfg.Data,
		TLS: cfg.TLS, TLSCA: cfg.TLSCA, TLSCert: cfg.TLSCert, TLSKey: cfg.TLSKey,
		Server: server, JoinToken: cfg.JoinToken, FullToken: cfg.FullToken,
		Clock: clock.Real{}, Timeout: 5 * time.Second,
	}
	switch role {
	case Partial, Full:
		o.Coordinators = cfg.Coordinator
	case Coordinator, Up:
		o.Catalog = cfg.Catalog
		o.Shared = len(cfg.Etcd) > 0
	}
	return o
}

// Run runs every check of the role, in order.
func Run(ctx context.Context, o Options) []Result {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	var out []Result
	out = append(out, checkGit(ctx, o.Git)...)
	out = append(out, checkData(o.Data)...)
	out = append(out, checkTLSFiles(o)...)
	if o.Role == Coordinator || o.Role == Up {
		out = append(out, checkCatalog(ctx, o))
	}
	for _, addr := range o.Coordinators {
		out = append(out, checkCoordinator(ctx, o, addr))
	}
	if o.Server != "" {
		out = append(out, checkServer(ctx, o)...)
	}
	if o.Role == Up {
		return append(out, JudgeUpTokens(o.JoinToken, o.FullToken, o.Shared)...)
	}
	_, err := os.Stat(filepath.Join(o.Data, identityFile))
	return append(out, JudgeTokens(o.Role, o.JoinToken, o.FullToken, err == nil)...)
}

// checkCatalog reads the catalog repository as the coordinator's first
// fetch would (a path, too: the file protocol is allowed for it, as the
// coordinator allows it).
func checkCatalog(ctx context.Context, o Options) Result {
	r := Result{Check: "catalog"}
	if strings.TrimSpace(o.Catalog) == "" {
		r.Status, r.Detail, r.Fix = Fail, "--catalog is empty", "give --catalog the catalog repository's URL or path"
		return r
	}
	commit, err := catalog.CheckSource(ctx, catalog.SourceGit(30*time.Second, ""), o.Catalog)
	if err != nil {
		r.Status, r.Detail = Fail, err.Error()
		r.Fix = "give --catalog a git repository with a commit on its default branch that this machine can read (a path, or a URL: check its host, the firewall, the credentials)"
		return r
	}
	r.Detail = fmt.Sprintf("%s: HEAD at %.12s", repokey.Redact(o.Catalog), commit)
	return r
}

func checkGit(ctx context.Context, git *gitcmd.Runner) []Result {
	if git == nil {
		git = gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{})
	}
	v, err := git.Version(ctx)
	if err != nil {
		return []Result{{Check: "git", Status: Fail, Detail: err.Error(), Fix: "install git 2.31 or later (2.43 for core.maxTreeDepth)"}}
	}
	return JudgeGit(v)
}

// checkData checks the data directory: it exists (or can be made) and is
// writable, and its file system has room.
func checkData(dir string) []Result {
	w := Result{Check: "data writable", Detail: dir + " is writable"}
	probe := dir
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// The node makes it at start: its nearest existing parent must be writable.
		probe = filepath.Dir(filepath.Clean(dir))
		for {
			if _, err := os.Stat(probe); err == nil || probe == filepath.Dir(probe) {
				break
			}
			probe = filepath.Dir(probe)
		}
		w.Detail = fmt.Sprintf("%s does not exist yet; %s is writable", dir, probe)
	case err != nil:
		return []Result{{Check: "data writable", Status: Fail, Detail: err.Error(), Fix: "fix the permissions of --data"}}
	case !st.IsDir():
		return []Result{{Check: "data writable", Status: Fail, Detail: dir + " is not a directory", Fix: "point --data at a directory"}}
	}
	f, err := os.CreateTemp(probe, ".gitfleet-doctor-*")
	out := []Result{w}
	if err != nil {
		out[0].Status, out[0].Detail, out[0].Fix = Fail, fmt.Sprintf("cannot write in %s: %v", probe, err), "give the service's user write access to --data (systemd: ReadWritePaths)"
	} else {
		f.Close()
		os.Remove(f.Name())
		if folds, err := mirror.FoldsCase(probe); err == nil {
			out = append(out, JudgeCase(probe, folds))
		}
	}
	free, total, err := diskSpace(probe)
	if err != nil {
		return append(out, Result{Check: "disk", Status: Warn, Detail: err.Error(), Fix: "check the free space of --data by hand"})
	}
	return append(out, JudgeDisk(probe, free, total))
}

func checkTLSFiles(o Options) []Result {
	var out []Result
	if o.TLSCert != "" || o.TLSKey != "" {
		r := Result{Check: "tls files"}
		if o.TLSCert == "" || o.TLSKey == "" {
			r.Status, r.Detail, r.Fix = Fail, "only one of --tls-cert and --tls-key is set", "give both, or neither"
			return append(out, r)
		}
		pair, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			r.Status, r.Detail, r.Fix = Fail, err.Error(), "make both files readable by the service's user, and the key the certificate's own"
			return append(out, r)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			r.Status, r.Detail, r.Fix = Fail, err.Error(), "use a valid X.509 certificate"
			return append(out, r)
		}
		out = append(out, JudgeCertificate(o.TLSCert, leaf.NotBefore, leaf.NotAfter, o.Clock.Now()))
	}
	if o.TLSCA != "" {
		r := Result{Check: "tls ca", Detail: o.TLSCA + " holds certificates"}
		if _, err := tlsconf.Client(true, o.TLSCA); err != nil {
			r.Status, r.Detail, r.Fix = Fail, err.Error(), "make --tls-ca a readable PEM file of certificates"
		}
		out = append(out, r)
	}
	return out
}

// checkCoordinator dials a coordinator's gRPC address, and makes the TLS
// handshake the node would make when TLS is on.
func checkCoordinator(ctx context.Context, o Options, addr string) Result {
	r := Result{Check: "coordinator", Detail: addr + " accepts connections"}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s: %v", addr, err), "start the coordinator, or check --coordinator and the firewall"
		return r
	}
	defer conn.Close()
	conf, err := tlsconf.Client(o.TLS, o.TLSCA)
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, err.Error(), "fix --tls-ca"
		return r
	}
	creds := insecure.NewCredentials()
	if conf == nil {
		r.Detail += " (plain TCP)"
	} else {
		host, _, _ := net.SplitHostPort(addr)
		conf.ServerName = host
		hs := conf.Clone()
		hs.NextProtos = []string{"h2"}
		if err := tls.Client(conn, hs).HandshakeContext(ctx); err != nil {
			r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s: TLS handshake: %v", addr, err), "the coordinator needs --tls-cert/--tls-key, and its certificate must name "+host+" and be signed by --tls-ca"
			return r
		}
		r.Detail += ", TLS handshake ok"
		creds = credentials.NewTLS(conf)
	}
	if err := probeGRPC(ctx, addr, creds); err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("%s: %v", addr, err)
		r.Fix = "check that --coordinator is a gitfleet coordinator's --grpc address"
		if conf == nil && tlsconf.SpeaksTLS(ctx, addr) {
			r.Fix = "the coordinator speaks TLS: add --tls (or --tls-ca FILE)"
		}
		return r
	}
	r.Detail += ", answers gRPC"
	return r
}

// probeGRPC makes a call that needs no registration and that a coordinator
// refuses to a caller without a node's identity: the refusal shows that a
// coordinator's gRPC service answers.
func probeGRPC(ctx context.Context, addr string, creds credentials.TransportCredentials) error {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("gRPC client: %w", err)
	}
	defer cc.Close()
	_, err = fleetv1.NewCoordinatorClient(cc).CatalogStatus(ctx, &fleetv1.CatalogStatusRequest{})
	switch status.Code(err) {
	case codes.OK, codes.Unauthenticated, codes.PermissionDenied:
		return nil
	case codes.Unimplemented:
		return fmt.Errorf("a gRPC server, but not a gitfleet coordinator: %w", err)
	default:
		return fmt.Errorf("no gRPC answer: %w", err)
	}
}

// checkServer asks the full node's GET /healthz and compares the clock with
// its Date header.
func checkServer(ctx context.Context, o Options) []Result {
	r := Result{Check: "full node http"}
	base := strings.TrimRight(o.Server, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := base + "/healthz"
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, err.Error(), "give --server as a URL, e.g. https://mirror.example"
		return []Result{r}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	sent := o.Clock.Now()
	resp, err := client.Do(req)
	received := o.Clock.Now()
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("GET %s: %v", url, err), "start the full node, or check --server and the firewall"
		return []Result{r}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("GET %s: %s", url, resp.Status), "check that --server is the full node (or its proxy passes /healthz)"
		return []Result{r}
	}
	r.Detail = "GET " + url + ": 200 OK"
	return []Result{r, JudgeSkew(base, resp.Header.Get("Date"), sent, received)}
}
