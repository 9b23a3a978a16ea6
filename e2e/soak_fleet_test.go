package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// soakFleet is a coordinator on bbolt (or two on etcd), a full node and
// partial nodes of mixed capacity (the last with a disk quota), each its
// own process, every path between them, and each node's path to the
// upstreams, through a link the test can cut or slow.
type soakFleet struct {
	t        testing.TB
	ups      *soakUpstreams
	settings soakSettings

	catalog  string
	etcd     string             // the etcd endpoint the coordinators share ("": one coordinator on bbolt)
	grpc     map[string]string  // where each coordinator listens
	coord    map[string][]*link // each node's paths to the coordinators, one per coordinator
	toCoord  map[string][]*link // each coordinator's paths from the nodes, with its advertised one
	adv      map[string]*link   // each coordinator's advertised address (where a follower sends nodes)
	tunnel   string             // the full node's tunnel listener
	tunLink  *link              // the partial nodes' path to it
	upLinks  map[string]*link   // each node's path to the upstreams (to ups.link)
	http     string             // the full node's public address: the test's own view, never cut
	base     string
	dataDirs map[string]string

	mu    sync.Mutex
	procs map[string]*proc
	all   []*proc // every process started, in order
	args  map[string][]string
	kills map[string]*sync.Mutex // one kill and restart of a role at a time

	// catalogMu guards the catalog's content and the API's additions.
	catalogMu sync.Mutex
	listed    map[int]bool // in the catalog
	yamlForm  map[int]bool // listed as a YAML entry rather than a .list line
	apiAdded  map[int]bool
	removed   map[int]bool // removed from the catalog and not listed since
	// apiRemoved are removed through the API: that wins over the catalog
	// (an entry it adds later stays out) until the API adds it again.
	apiRemoved map[int]bool
	inFlight   map[int]bool // an API call about it has not answered yet
	unknown    map[int]bool // an API call about it got no clear answer: neither wanted nor removed
}

// soakSettings are the fleet's timing, from which every bound of the soak
// is derived.
type soakSettings struct {
	maxInterval time.Duration
	grace       time.Duration
	quota       string
	partials    int    // partial nodes
	etcd        string // the endpoint of an etcd that two coordinators share ("": one coordinator on bbolt)
}

// soakCapacity is the capacity of each partial node, by number (from 1),
// as many as a run has.
var soakCapacity = []string{"2", "1", "1", "0.5", "0.5", "1.5", "1", "0.5"}

func (s *soakFleet) nodeNames() []string {
	names := []string{"full"}
	for i := 1; i <= s.settings.partials; i++ {
		names = append(names, fmt.Sprintf("partial-%d", i))
	}
	return names
}

// describe names the fleet's roles for the summary line.
func (s *soakFleet) describe() string {
	caps := make([]string, s.settings.partials)
	for i := range caps {
		caps[i] = soakCapacity[i%len(soakCapacity)]
	}
	coords := "coordinator on bbolt"
	if s.etcd != "" {
		coords = "2 coordinators on etcd"
	}
	return fmt.Sprintf("%s, full node, %d partial nodes of capacity %s (the last with a %s quota)",
		coords, s.settings.partials, strings.Join(caps, "/"), s.settings.quota)
}

// coordNames are the coordinators' roles.
func (s *soakFleet) coordNames() []string {
	if s.etcd == "" {
		return []string{"coordinator"}
	}
	return []string{"coordinator-1", "coordinator-2"}
}

func (s *soakFleet) roles() []string { return append(s.coordNames(), s.nodeNames()...) }

func newSoakFleet(t testing.TB, ups *soakUpstreams, st soakSettings) *soakFleet {
	s := &soakFleet{t: t, ups: ups, settings: st, catalog: filepath.Join(t.TempDir(), "catalog"),
		etcd: st.etcd, grpc: map[string]string{}, coord: map[string][]*link{}, toCoord: map[string][]*link{}, adv: map[string]*link{},
		tunnel: freeAddr(t), http: freeAddr(t),
		dataDirs: map[string]string{}, procs: map[string]*proc{}, args: map[string][]string{}, kills: map[string]*sync.Mutex{},
		listed: map[int]bool{}, yamlForm: map[int]bool{}, apiAdded: map[int]bool{}, removed: map[int]bool{}, apiRemoved: map[int]bool{},
		inFlight: map[int]bool{}, unknown: map[int]bool{}}
	s.base = "http://" + s.http
	s.tunLink = newLink(t, "partials-full", s.tunnel)
	upLinks, dns, port := newUpstreamLinks(t, s.nodeNames(), ups.link.addr)
	s.upLinks = upLinks
	ups.host = fmt.Sprintf("%s:%d", soakUpstreamHost, port)
	for _, c := range s.coordNames() {
		s.grpc[c] = freeAddr(t)
		s.adv[c] = newLink(t, "advertised-"+c, s.grpc[c])
		s.toCoord[c] = append(s.toCoord[c], s.adv[c])
		for _, n := range s.nodeNames() {
			l := newLink(t, n+"-"+c, s.grpc[c])
			s.coord[n] = append(s.coord[n], l)
			s.toCoord[c] = append(s.toCoord[c], l)
		}
	}
	for _, r := range s.roles() {
		s.dataDirs[r] = filepath.Join(t.TempDir(), r)
		s.kills[r] = &sync.Mutex{}
	}
	// Flags of every role (the heartbeat is the coordinators' to set).
	common := []string{"--join-token", "soak-join", "--allow-private-upstreams", "--egress-ports", fmt.Sprint(port),
		"--log-level", "debug"}
	for _, c := range s.coordNames() {
		args := append([]string{"coordinator", "--data", s.dataDirs[c], "--catalog", s.catalog,
			"--grpc", s.grpc[c], "--grace", st.grace.String(), "--warmup", "5s", "--warmup-nodes", fmt.Sprint(len(s.nodeNames())), "--catalog-interval", "2s",
			"--max-purge", "0.5", "--purge-window", "1m", "--full-token", "soak-full", "--heartbeat", "1s"}, common...)
		if s.etcd != "" {
			// A follower sends nodes to the leader's advertised address:
			// its own link, which a partition of the leader cuts too.
			args = append(args, "--etcd", s.etcd, "--etcd-prefix", soakEtcdPrefix, "--etcd-lease", "3s", "--etcd-compaction", "10s",
				"--advertise", s.adv[c].addr)
		}
		s.args[c] = args
	}
	capacity := map[string]string{"full": "1"}
	for i := 1; i <= st.partials; i++ {
		capacity[fmt.Sprintf("partial-%d", i)] = soakCapacity[(i-1)%len(soakCapacity)]
	}
	for _, n := range s.nodeNames() {
		mode := "partial"
		if n == "full" {
			mode = "full"
		}
		args := append([]string{"node", "--mode", mode, "--name", n, "--data", s.dataDirs[n], "--coordinator", joinAddrs(s.coord[n]),
			"--capacity", capacity[n], "--max-interval", st.maxInterval.String(), "--fetchers", "3", "--dns-server", dns[n]}, common...)
		switch n {
		case "full":
			args = append(args, "--full-token", "soak-full", "--http", s.http, "--tunnel", s.tunnel, "--tunnel-advertise", s.tunLink.addr,
				"--api-token", apiToken, "--webhook-secret", webhookSecret)
		case fmt.Sprintf("partial-%d", st.partials):
			args = append(args, "--disk-quota", st.quota)
		}
		s.args[n] = args
	}
	return s
}

func joinAddrs(ls []*link) string {
	addrs := make([]string, len(ls))
	for i, l := range ls {
		addrs[i] = l.addr
	}
	return strings.Join(addrs, ",")
}

// start runs role (again, after a kill).
func (s *soakFleet) start(role string) {
	p := start(s.t, role, s.args[role]...)
	s.mu.Lock()
	s.procs[role] = p
	s.all = append(s.all, p)
	s.mu.Unlock()
}

// keepLogs copies the log of every process the soak ran into dir (one
// file per role, its runs one after another), for a run to be studied.
func (s *soakFleet) keepLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	logs := map[string][]byte{}
	for n, p := range s.all {
		b, err := os.ReadFile(p.log)
		if err != nil {
			return err
		}
		logs[p.name] = append(logs[p.name], fmt.Sprintf("==== run %d of %s ====\n", n, p.name)...)
		logs[p.name] = append(logs[p.name], b...)
	}
	for name, b := range logs {
		if err := os.WriteFile(filepath.Join(dir, name+".log"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (s *soakFleet) proc(role string) *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[role]
}

// kill sends SIGKILL to role and starts it again after down.
func (s *soakFleet) kill(role string, down time.Duration) {
	s.kills[role].Lock()
	defer s.kills[role].Unlock()
	s.proc(role).kill()
	time.Sleep(down)
	s.start(role)
}

// crashed restarts every role that ended by itself and names them.
func (s *soakFleet) crashed() []string {
	var out []string
	for _, r := range s.roles() {
		if !s.kills[r].TryLock() {
			continue // being killed and restarted by the test
		}
		p := s.proc(r)
		select {
		case <-p.done:
			if !p.stopped.Load() {
				out = append(out, fmt.Sprintf("%s exited by itself (%v)", r, p.exit))
				p.stopped.Store(true)
				s.start(r)
			}
		default:
		}
		s.kills[r].Unlock()
	}
	return out
}

// writeCatalog commits the catalog: most repositories as lines of four
// .list files, those in yamlForm as YAML entries.
func (s *soakFleet) writeCatalog(msg string) error {
	lists := make([]strings.Builder, 4)
	if err := os.RemoveAll(filepath.Join(s.catalog, "lists")); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(s.catalog, "y")); err != nil {
		return err
	}
	keys := make([]int, 0, len(s.listed))
	for i := range s.listed {
		keys = append(keys, i)
	}
	slices.Sort(keys)
	for _, i := range keys {
		if s.yamlForm[i] {
			p := filepath.Join(s.catalog, "y", fmt.Sprintf("r%04d", i), fmt.Sprintf("r%04d", i))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			entry := "url: " + s.ups.url(i) + "\n"
			if soakForkDeclared(i) {
				entry += "network: " + soakNetwork + "\n"
			}
			if err := os.WriteFile(p, []byte(entry), 0o644); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(&lists[i%len(lists)], "%s\n", s.ups.url(i))
	}
	if err := os.MkdirAll(filepath.Join(s.catalog, "lists"), 0o755); err != nil {
		return err
	}
	for j := range lists {
		if err := os.WriteFile(filepath.Join(s.catalog, "lists", fmt.Sprintf("part-%d.list", j)), []byte("# soak\n"+lists[j].String()), 0o644); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(s.catalog, ".git")); err != nil {
		if err := gittest.Git("", "init", "-q", "-b", "main", s.catalog); err != nil {
			return err
		}
	}
	if err := gittest.Git(s.catalog, "add", "-A"); err != nil {
		return err
	}
	return gittest.Git(s.catalog, "commit", "-q", "--allow-empty", "-m", msg)
}

// desired is every repository the fleet must serve now (the catalog's and
// the API's, less those the API removed); gone, every one it must not.
// Those an API call about is in flight or got no clear answer are in
// neither.
func (s *soakFleet) desired() (want, gone []int) {
	s.catalogMu.Lock()
	defer s.catalogMu.Unlock()
	for i := range s.ups.repos {
		switch {
		case s.inFlight[i] || s.unknown[i]:
		case (s.listed[i] || s.apiAdded[i]) && !s.apiRemoved[i]:
			want = append(want, i)
		case s.removed[i] || s.apiRemoved[i]:
			gone = append(gone, i)
		}
	}
	return want, gone
}

// served is the branches and tags the full node serves for repository i
// (nil, nil if it does not serve it).
func (s *soakFleet) served(i int) (map[string]string, error) {
	resp, err := http.Get(s.base + "/" + s.ups.key(i) + ".git/info/refs?service=git-upload-pack")
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	return lsRemote(s.base + "/" + s.ups.key(i) + ".git")
}

// hook delivers a signed GitHub push webhook for repository i.
func (s *soakFleet) hook(i int, after, delivery string) error {
	body := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","after":"%s","repository":{"clone_url":"%s"}}`, after, s.ups.url(i)))
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write(body)
	req, err := http.NewRequest("POST", s.base+"/hooks/github", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
