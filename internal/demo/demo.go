// Package demo runs a whole gitfleet on one machine with no network: local
// upstream repositories served over HTTP on 127.0.0.1 (some of which keep
// receiving commits), a catalog repository, a coordinator, a full node and
// two partial nodes. It is what `gitfleet demo` runs. It binds its ports
// before it starts anything, and its banner gives the API token that
// gitfleet ctl's writes need.
package demo

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/coordinator"
	"github.com/gitfleet/gitfleet/internal/fullnode"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/redactlog"
)

// Options of the demo.
type Options struct {
	Dir      string // working directory (default: a new temporary one, removed at the end)
	HTTPAddr string // the full node's public address
	Repos    int
	Every    time.Duration // how often an upstream gets a new commit
	// LogLevel of the log, which goes to gitfleet.log in Dir so that the
	// demo's own output stays readable.
	LogLevel slog.Level
}

// Run runs the demo until ctx ends.
func Run(ctx context.Context, opt Options, out io.Writer) error {
	if opt.Repos <= 0 {
		opt.Repos = 8
	}
	if opt.Every <= 0 {
		opt.Every = 15 * time.Second
	}
	// The ports first: one in use stops the demo before it makes or
	// prints anything.
	httpLn, err := net.Listen("tcp", opt.HTTPAddr)
	if err != nil {
		return fmt.Errorf("demo: listen --http %s: %w", opt.HTTPAddr, err)
	}
	grpcLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		httpLn.Close()
		return err
	}
	defer func() { // unless the roles took them
		if httpLn != nil {
			httpLn.Close()
		}
		if grpcLn != nil {
			grpcLn.Close()
		}
	}()
	dir := opt.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "gitfleet-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	logFile, err := os.Create(filepath.Join(dir, "gitfleet.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := slog.New(redactlog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: opt.LogLevel})))
	up, err := gittest.Start(filepath.Join(dir, "upstreams"))
	if err != nil {
		return fmt.Errorf("demo: start upstreams: %w", err)
	}
	defer up.Close()
	names := make([]string, opt.Repos)
	var list, yamlURL strings.Builder
	for i := range names {
		names[i] = fmt.Sprintf("demo/project-%02d", i+1)
		if err := up.Create(names[i], []string{"main", "dev"}, []string{"v1.0"}); err != nil {
			return fmt.Errorf("demo: create upstream: %w", err)
		}
		if i == 0 {
			fmt.Fprintf(&yamlURL, "url:\n  - %s\n", up.RepoURL(names[i]))
		} else {
			fmt.Fprintf(&list, "%s\n", up.RepoURL(names[i]))
		}
	}
	catalogDir := filepath.Join(dir, "catalog")
	if err := writeCatalog(catalogDir, "# the demo's catalog\n"+list.String(), yamlURL.String()); err != nil {
		return err
	}

	token, fullToken, apiToken := "demo-token", "demo-full-token", crand.Text()
	grpcAddr := grpcLn.Addr().String()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 4)
	ccfg := coordinator.Config{DataDir: filepath.Join(dir, "coordinator"), Catalog: catalogDir, CatalogInterval: 10 * time.Second,
		JoinToken: token, FullToken: fullToken, Grace: 30 * time.Second, Warmup: 3 * time.Second, WarmupNodes: 3, AllowPrivate: true, HeartbeatInterval: 2 * time.Second}
	coordLn := grpcLn
	grpcLn = nil
	go func() { errc <- coordinator.Serve(ctx, ccfg, log.With("role", "coordinator"), coordLn) }()
	nodeConfig := func(name string) node.Config {
		return node.Config{Name: name, Capacity: 1, DataDir: filepath.Join(dir, name), Coordinators: []string{grpcAddr},
			JoinToken: token, AllowPrivate: true, MaxInterval: 20 * time.Second, MinInterval: 5 * time.Second}
	}
	fcfg := fullnode.Config{Config: nodeConfig("full"), FullToken: fullToken, HTTPAddr: opt.HTTPAddr, TunnelAddr: "127.0.0.1:0",
		HTTPListener: httpLn}
	fcfg.API.Token = apiToken
	full, err := fullnode.New(fcfg, log.With("role", "full"), clock.Real{})
	if err != nil {
		return err
	}
	httpLn = nil // the full node's now
	go func() { errc <- full.Run(ctx) }()
	for _, name := range []string{"partial-1", "partial-2"} {
		n, err := node.New(nodeConfig(name), log.With("role", name), clock.Real{}, nil)
		if err != nil {
			return err
		}
		go func() { errc <- n.Run(ctx) }()
	}

	base := "http://" + fcfg.HTTPListener.Addr().String()
	fmt.Fprintf(out, "\ngitfleet demo: %d upstream repositories on %s, a coordinator, a full node and two partial nodes.\n", opt.Repos, up.URL)
	fmt.Fprintf(out, "Working directory: %s (log: %s)\n\n", dir, logFile.Name())
	fmt.Fprintf(out, "Console:      %s/\nJSON API:     %s/api/v1/repos\nAPI token:    %s (for writes: the console's buttons, gitfleet ctl add, fetch, rm)\n\nClone from the mirror, for example:\n", base, base, apiToken)
	for _, n := range names[:3] {
		fmt.Fprintf(out, "  git clone %s/%s\n", base, strings.TrimPrefix(up.RepoURL(n), "http://"))
	}
	fmt.Fprintf(out, "\nOr use gitfleet ctl, in another shell:\n  export GITFLEET_SERVER=%s GITFLEET_TOKEN=%s\n  gitfleet ctl repos\n  gitfleet ctl fetch %s --wait\n",
		base, apiToken, strings.TrimSuffix(strings.TrimPrefix(up.RepoURL(names[0]), "http://"), ".git"))
	fmt.Fprintf(out, "\nA new commit lands on a random upstream every %s. Press Ctrl-C to stop.\n\n", opt.Every)

	tick := time.NewTicker(opt.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "\nstopping the demo")
			return nil
		case err := <-errc:
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
		case <-tick.C:
			name := names[rand.IntN(len(names))]
			if id, err := up.Commit(name, "main"); err == nil {
				fmt.Fprintf(out, "%s  upstream %s: new commit %s on main\n", time.Now().Format("15:04:05"), name, id[:10])
			}
		}
	}
}

func writeCatalog(dir, list, yamlEntry string) error {
	if err := os.MkdirAll(filepath.Join(dir, "d", "demo"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "demo.list"), []byte(list), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "demo", "project-01"), []byte(yamlEntry), 0o644); err != nil {
		return err
	}
	if err := gittest.Git("", "init", "-q", "-b", "main", dir); err != nil {
		return err
	}
	if err := gittest.Git(dir, "add", "-A"); err != nil {
		return err
	}
	return gittest.Git(dir, "commit", "-q", "-m", "demo catalog")
}
