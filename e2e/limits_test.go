package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// Hostile upstreams meet the limits of a real `gitfleet up`: one larger
// than --max-repo-size, one with more branches than --max-refs, one with a
// 4,000-byte ref name, next to a normal one. The API shows each one's
// state, the over-limit ones leave nothing on disk and are not retried in
// a loop, and the long ref costs only itself.
func TestUpstreamsOverLimitsShowTheirStateInTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	const normal, big, many, long = 0, 1, 2, 3
	repos := []int{normal, big, many, long}
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main", "dev"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.up.AddBlob(f.name(big), "main", 4<<20); err != nil {
		t.Fatal(err)
	}
	var branches []string
	for i := 0; i < 60; i++ {
		branches = append(branches, fmt.Sprintf("refs/heads/feature-%02d", i))
	}
	if err := f.up.AddRefs(f.name(many), "main", branches); err != nil {
		t.Fatal(err)
	}
	longRef := "refs/heads/" + strings.Repeat("x", 4000)
	if err := f.up.AddRefs(f.name(long), "main", []string{longRef}); err != nil {
		t.Fatal(err)
	}
	f.writeCatalog(repos, "hostile upstreams")
	data := filepath.Join(t.TempDir(), "up")
	const apiToken = "limits-operator-token"
	p := start(t, "up", "up", "--data", data, "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token, "--api-token", apiToken,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "1m", "--min-interval", "500ms",
		"--max-repo-size", "1MiB", "--max-refs", "50", "--max-ref-length", "1024", "--log-level", "debug")

	want := map[int]string{normal: "ok", big: "too-large", many: "too-many-refs", long: "ok"}
	eventually(t, 90*time.Second, "each repository in its state", func() error {
		api, err := apiReposAs(f.base, apiToken)
		if err != nil {
			return err
		}
		for i, st := range want {
			if r := api[f.key(i)]; r.State != st {
				return fmt.Errorf("%s is %q (%s), want %q", f.key(i), r.State, r.Error, st)
			}
		}
		return nil
	})
	if err := f.servedLikeUpstream([]int{normal}); err != nil {
		t.Fatal(err)
	}
	// The long ref is left out; the rest of that repository is served.
	upRefs, err := f.up.Refs(f.name(long))
	if err != nil {
		t.Fatal(err)
	}
	delete(upRefs, longRef)
	eventually(t, 30*time.Second, "the repository with a long ref served without it", func() error {
		got, err := lsRemote(f.base + "/" + f.key(long) + ".git")
		if err != nil {
			return err
		}
		if !maps.Equal(got, upRefs) {
			return fmt.Errorf("served %d refs, want %d", len(got), len(upRefs))
		}
		return nil
	})
	api, err := apiReposAs(f.base, apiToken) // the operator sees which limit
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{big, many} {
		r := api[f.key(i)]
		if r.Served {
			t.Errorf("%s is %s and served", f.key(i), r.State)
		}
		if _, err := os.Stat(filepath.Join(data, "repos", f.key(i)+".git")); err == nil {
			t.Errorf("%s is %s and on disk", f.key(i), r.State)
		}
	}
	if !strings.Contains(api[f.key(big)].Error, "max-repo-size") || !strings.Contains(api[f.key(many)].Error, "max-refs") {
		t.Errorf("the errors do not name the limits: %q, %q", api[f.key(big)].Error, api[f.key(many)].Error)
	}
	// Anyone sees the class the node said of each, relayed by the
	// coordinator and kept by the full node's view.
	public, err := apiRepos(f.base)
	if err != nil {
		t.Fatal(err)
	}
	for i, class := range map[int]string{big: "too large", many: "too many refs"} {
		if r, op := public[f.key(i)], api[f.key(i)]; r.Error != class || r.Class != class || op.Class != class {
			t.Errorf("%s: the public sees %q (class %q), the operator class %q; want %q", f.key(i), r.Error, r.Class, op.Class, class)
		}
	}
	left, _ := os.ReadDir(filepath.Join(data, "tmp"))
	left = slices.DeleteFunc(left, func(e os.DirEntry) bool { return inFlightTrace(e.Name()) })
	if len(left) != 0 {
		t.Errorf("left in tmp: %d entries", len(left))
	}
	// Not retried in a loop: the over-limit repositories wait --max-interval
	// (a minute here) while the others are checked every few seconds: two
	// more checks of the normal one, and none of them.
	countFor := func(i int) int { return p.count("key=" + f.key(i) + " class=") }
	before := [2]int{countFor(big), countFor(many)}
	if before[0] == 0 || before[1] == 0 {
		t.Fatalf("the failed checks are not in the log as expected (%v): the test below would prove nothing", before)
	}
	checksBefore := [3]uint64{}
	for j, i := range []int{normal, big, many} {
		if checksBefore[j], err = checksOf(f.base, f.key(i), apiToken); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "two more checks of the normal repository", func() error {
		n, err := checksOf(f.base, f.key(normal), apiToken)
		if err != nil || n < checksBefore[0]+2 {
			return fmt.Errorf("%d checks (%v), want %d", n, err, checksBefore[0]+2)
		}
		return nil
	})
	for j, i := range []int{big, many} {
		n, err := checksOf(f.base, f.key(i), apiToken)
		if err != nil {
			t.Fatal(err)
		}
		if n != checksBefore[j+1] {
			t.Errorf("%s, over a limit, was checked again meanwhile: %d checks, then %d", f.key(i), checksBefore[j+1], n)
		}
	}
	if after := [2]int{countFor(big), countFor(many)}; after != before {
		t.Errorf("over-limit repositories were checked again meanwhile: %v -> %v", before, after)
	}
	if p.count("skipping refs that cannot be mirrored") != 1 {
		t.Errorf("the skipped ref was logged %d times, want once", p.count("skipping refs that cannot be mirrored"))
	}
	if v, err := versionOfGit(); err == nil && !v.AtLeast(2, 43) && p.count("does not bound tree depth") != 1 {
		t.Errorf("git %v: the missing core.maxTreeDepth was logged %d times, want once", v, p.count("does not bound tree depth"))
	}
}

// checksOf is how many checks of key the full node at base tells of.
func checksOf(base, key, token string) (uint64, error) {
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/repos/"+key, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Checks uint64 `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return r.Checks, nil
}

func versionOfGit() (gitcmd.Version, error) {
	out, err := gittest.Output("", "version")
	if err != nil {
		return gitcmd.Version{}, err
	}
	return gitcmd.ParseVersion(out)
}

// A stalling upstream: it accepts connections and never answers, so git
// and its remote helper wait on it.
func stallingUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

// descendants lists the live processes below pid, with their command lines.
func descendants(pid int) map[int]string {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		parent[p], _ = strconv.Atoi(f[1])
	}
	out := map[int]string{}
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
				out[p] = strings.ReplaceAll(string(cmd), "\x00", " ")
				break
			}
		}
	}
	return out
}

// alive reports whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// A node killed with SIGKILL (no chance to clean up) leaves no git process
// behind: not git, which the kernel kills with its parent, nor git's
// remote helper waiting on a stalled upstream, which git's supervisor
// kills with the whole group.
func TestKilledNodeLeavesNoGitBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	f := newFleet(t)
	stall := stallingUpstream(t)
	f.writeFile("lists/stall.list", stall+"/team/stalled.git\n")
	if err := gittest.Git("", "init", "-q", "-b", "main", f.catalog); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.catalog, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.catalog, "commit", "-q", "-m", "a stalling upstream"); err != nil {
		t.Fatal(err)
	}
	p := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s")
	var gits map[int]string
	eventually(t, 60*time.Second, "git waiting on the stalled upstream", func() error {
		gits = descendants(p.cmd.Process.Pid)
		for _, cmd := range gits {
			if strings.Contains(cmd, "remote-http") && strings.Contains(cmd, "stalled") {
				return nil
			}
		}
		return fmt.Errorf("git processes: %v", gits)
	})
	p.kill()
	eventually(t, 60*time.Second, "every git process gone", func() error {
		for pid, cmd := range gits {
			if alive(pid) {
				return fmt.Errorf("pid %d still runs: %s", pid, cmd)
			}
		}
		return nil
	})
	t.Logf("%d processes (supervisor, git, remote helper) ended with gitfleet", len(gits))
}
