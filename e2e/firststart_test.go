package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/alert"
	"github.com/gitfleet/gitfleet/internal/alert/alerttest"
)

// catalogStatus is GET /api/v1/catalog, as token sees it ("": anonymous).
func catalogStatus(base, token string) (status struct {
	Commit  string     `json:"commit"`
	Repos   int        `json:"repos"`
	Error   string     `json:"error"`
	ErrorAt *time.Time `json:"error_at"`
}, err error) {
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/catalog", nil)
	if err != nil {
		return status, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return status, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return status, fmt.Errorf("GET /api/v1/catalog: %s: %s", resp.Status, b)
	}
	return status, json.NewDecoder(resp.Body).Decode(&status)
}

// ctlAs runs gitfleet ctl against base with token, as the README tells,
// through the environment; it returns the exit status and the output.
func ctlAs(t *testing.T, base, token string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"ctl"}, args...)...)
	cmd.Env = append(os.Environ(), "GITFLEET_SERVER="+base, "GITFLEET_TOKEN="+token, "XDG_CONFIG_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("gitfleet ctl %v: %v", args, err)
	}
	return 0, string(out)
}

// alertsOf counts the firings and resolutions of rule a receiver got.
func alertsOf(t *testing.T, hook *alerttest.HTTPReceiver, rule string) (fired, resolved int) {
	t.Helper()
	for _, r := range hook.Requests() {
		var b alert.WebhookBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("webhook body %s: %v", r.Body, err)
		}
		switch {
		case b.Rule != rule:
		case b.Status == alert.Firing:
			fired++
		case b.Status == alert.Resolved:
			resolved++
		}
	}
	return fired, resolved
}

// `gitfleet up` alone, with a catalog path that does not exist, keeps
// running but says that the catalog cannot be read wherever people look:
// the API (the error and since when), ctl catalog (exit status 1), the
// console's banner, an alert, the log, doctor. Once the catalog is there,
// it is mirrored and all of that ends; a catalog that goes away later
// keeps its last good commit.
func TestUpWithAWrongCatalogSaysSoEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	hook := alerttest.StartHTTP(t, nil)
	f := newFleet(t) // f.catalog is not made yet
	data := filepath.Join(t.TempDir(), "up")
	up := start(t, "up", "up", "--data", data, "--catalog", f.catalog, "--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t),
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms",
		"--alert", hook.URL+"/alerts", "--alert-interval", "500ms", "--alert-for", "1s")
	var token string
	eventually(t, 30*time.Second, "up made its API token", func() error {
		b, err := os.ReadFile(filepath.Join(data, "node", "api-token"))
		token = strings.TrimSpace(string(b))
		return err
	})
	eventually(t, 30*time.Second, "the API says the catalog cannot be read", func() error {
		st, err := catalogStatus(f.base, token)
		if err != nil {
			return err
		}
		if !strings.Contains(st.Error, f.catalog) || st.ErrorAt == nil || st.Commit != "" || st.Repos != 0 {
			return fmt.Errorf("as the operator: %+v", st)
		}
		return nil
	})
	if st, err := catalogStatus(f.base, ""); err != nil || st.Error == "" || strings.Contains(st.Error, f.catalog) || st.ErrorAt == nil {
		t.Errorf("anonymous: %+v, %v; want the error's class and its time", st, err)
	}
	code, out := ctlAs(t, f.base, token, "catalog")
	if code != 1 || !strings.Contains(out, "commit none yet: 0 repositories") ||
		!strings.Contains(out, "gitfleet ctl: the catalog cannot be read since ") || !strings.Contains(out, f.catalog) {
		t.Errorf("ctl catalog: exit %d:\n%s", code, out)
	}
	if _, body := httpGet(t, f.base+"/"); !strings.Contains(body, `id="catalog-error"`) || !strings.Contains(body, "The catalog cannot be read") {
		t.Errorf("the console's overview has no banner:\n%s", body)
	}
	eventually(t, 30*time.Second, "the alert catalog-unreadable", func() error {
		if fired, _ := alertsOf(t, hook, alert.RuleCatalogUnreadable); fired != 1 {
			return fmt.Errorf("%d firings", fired)
		}
		return nil
	})
	log := readLog(up)
	if !strings.Contains(log, "the catalog cannot be read: no repositories until it can") || strings.Contains(log, "keeping the") {
		t.Errorf("the log does not say there is no catalog, or says it keeps one:\n%s", log)
	}
	doctor, err := runBinary(t, "doctor", "up", "--data", t.TempDir(), "--catalog", f.catalog, "--server", f.base)
	if err == nil || !strings.Contains(doctor, "fail  catalog") || !strings.Contains(doctor, f.catalog) ||
		!strings.Contains(doctor, "ok    token join-token") || !strings.Contains(doctor, "ok    token full-token") {
		t.Errorf("doctor up: %v\n%s", err, doctor)
	}

	// The catalog comes: it is mirrored, the error and the alert end.
	repos := seq(0, 3)
	f.seed(repos, "3 repositories")
	eventually(t, 60*time.Second, "the catalog read and mirrored", func() error {
		st, err := catalogStatus(f.base, token)
		if err != nil {
			return err
		}
		if st.Error != "" || st.ErrorAt != nil || st.Commit == "" {
			return fmt.Errorf("catalog %+v", st)
		}
		return f.servedLikeUpstream(repos)
	})
	if code, out := ctlAs(t, f.base, token, "catalog"); code != 0 || strings.Contains(out, "cannot be read") {
		t.Errorf("ctl catalog of a catalog read: exit %d:\n%s", code, out)
	}
	if _, body := httpGet(t, f.base+"/"); strings.Contains(body, `id="catalog-error"`) {
		t.Errorf("the banner stays once the catalog is read")
	}
	eventually(t, 30*time.Second, "the alert resolved", func() error {
		if _, resolved := alertsOf(t, hook, alert.RuleCatalogUnreadable); resolved != 1 {
			return fmt.Errorf("%d resolutions", resolved)
		}
		return nil
	})
	good, err := catalogStatus(f.base, token)
	if err != nil {
		t.Fatal(err)
	}

	// The catalog goes away: the last good commit stays, with the error.
	if err := os.RemoveAll(f.catalog); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the API says the catalog cannot be read, and keeps the last good commit", func() error {
		st, err := catalogStatus(f.base, token)
		if err != nil {
			return err
		}
		if st.Error == "" || st.Commit != good.Commit || st.Repos != good.Repos {
			return fmt.Errorf("catalog %+v, want the error and commit %s", st, good.Commit)
		}
		return nil
	})
	if !regexp.MustCompile(`catalog refresh failed; keeping the last good catalog".* commit=` + good.Commit).MatchString(readLog(up)) {
		t.Errorf("the log does not say it keeps the last good catalog")
	}
	if err := f.servedLikeUpstream(repos); err != nil {
		t.Errorf("the repositories of the last good catalog: %v", err)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `gitfleet up` with one of its ports in use exits non-zero at once, with
// one line that names the port, and has started nothing: no role, no API
// token made or printed, no data directory.
func TestUpOnABusyPortExitsBeforeItStartsAnything(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	busy, err := net.Listen("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	catalog := filepath.Join(t.TempDir(), "catalog")
	for _, port := range []string{"http", "grpc", "tunnel"} {
		data := filepath.Join(t.TempDir(), "up")
		addrs := map[string]string{"http": freeAddr(t), "grpc": freeAddr(t), "tunnel": freeAddr(t)}
		addrs[port] = busy.Addr().String()
		out, err := runBinary(t, "up", "--data", data, "--catalog", catalog, "--http", addrs["http"], "--grpc", addrs["grpc"], "--tunnel", addrs["tunnel"])
		var exit *exec.ExitError
		want := "gitfleet: listen --" + port + " " + busy.Addr().String() + ": "
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
			t.Errorf("--%s in use: %v, output:\n%s\nwant one line starting %q", port, err, out, want)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--%s in use: up made its data directory (%v)", port, err)
		}
	}
}

// `gitfleet up` without --join-token makes one at its first start, keeps
// it in its data directory, and a partial node joins with it; a restart
// keeps the same token.
func TestUpAloneMakesTheJoinTokenAPartialNodeJoinsWith(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 3)
	f.seed(repos, "3 repositories")
	data := filepath.Join(t.TempDir(), "up")
	args := []string{"up", "--data", data, "--catalog", f.catalog, "--http", f.http, "--grpc", f.grpc, "--tunnel", freeAddr(t),
		"--allow-private-upstreams", "--catalog-interval", "1s", "--heartbeat", "500ms", "--max-interval", "2s", "--min-interval", "500ms"}
	up := start(t, "up", args...)
	logSays(t, up, "partial nodes join with the join token in the file")
	b, err := os.ReadFile(filepath.Join(data, "join-token"))
	if err != nil {
		t.Fatal(err)
	}
	f.token = strings.TrimSpace(string(b))
	f.startNode("partial", "partial")
	eventually(t, 60*time.Second, "the partial node admitted", func() error {
		nodes, err := apiNodes(f.base)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Name == "partial" && n.State == "alive" {
				return nil
			}
		}
		return fmt.Errorf("nodes %+v", nodes)
	})
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })

	up.stop()
	again := start(t, "up-again", args...)
	logSays(t, again, "partial nodes join with the join token in the file")
	if b2, err := os.ReadFile(filepath.Join(data, "join-token")); err != nil || string(b2) != string(b) {
		t.Errorf("after a restart the join token is %q (%v), was %q", b2, err, b)
	}
	if strings.Contains(readLog(up)+readLog(again), f.token) {
		t.Errorf("up logged its join token")
	}
}

// A partial node that dials a TLS coordinator in clear is told, once,
// which flag to add, instead of gRPC's "error reading server preface".
func TestAPartialNodeInClearIsToldTheCoordinatorSpeaksTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	_, certFile, keyFile := writePKI(t)
	f := newFleet(t)
	f.seed(seq(0, 2), "2 repositories")
	start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", f.grpc, "--tunnel", freeAddr(t), "--join-token", f.token,
		"--tls-cert", certFile, "--tls-key", keyFile, "--allow-private-upstreams", "--catalog-interval", "1s")
	f.startNode("partial-plain", "partial")
	plain := f.procs["partial-plain"]
	const hint = "the coordinator speaks TLS: add --tls (or --tls-ca FILE)"
	eventually(t, 60*time.Second, "the hint, and four retries", func() error {
		if plain.count(hint) == 0 || plain.count("coordinator unreachable") < 4 {
			return fmt.Errorf("%d hints, %d retries", plain.count(hint), plain.count("coordinator unreachable"))
		}
		return nil
	})
	if n := plain.count(hint); n != 1 {
		t.Errorf("the hint was logged %d times in %d retries, want once", n, plain.count("coordinator unreachable"))
	}
	if plain.count("registered") != 0 {
		t.Errorf("a node in clear was let in")
	}
}

// The demo binds its port before it prints anything: on a port in use it
// stops with one line and no banner. Its banner gives the API token, with
// which gitfleet ctl's writes work, as the README shows them.
func TestTheDemoBindsFirstAndItsBannerGivesTheAPIToken(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	busy, err := net.Listen("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	out, err := runBinary(t, "demo", "--http", busy.Addr().String())
	busy.Close()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || strings.Count(out, "\n") != 1 ||
		!strings.HasPrefix(out, "gitfleet: demo: listen --http "+busy.Addr().String()) {
		t.Errorf("demo on a port in use: %v, output:\n%s", err, out)
	}

	addr := freeAddr(t)
	demo := start(t, "demo", "demo", "--http", addr)
	banner := regexp.MustCompile(`API token:    (\S+) `)
	fetchLine := regexp.MustCompile(`gitfleet ctl fetch (\S+) --wait`)
	upstreams := regexp.MustCompile(`upstream repositories on (http://\S+),`)
	var token, key, upstream string
	eventually(t, 60*time.Second, "the banner", func() error {
		log := readLog(demo)
		m, k, u := banner.FindStringSubmatch(log), fetchLine.FindStringSubmatch(log), upstreams.FindStringSubmatch(log)
		if m == nil || k == nil || u == nil {
			return errors.New("no banner yet")
		}
		token, key, upstream = m[1], k[1], u[1]
		return nil
	})
	log := readLog(demo)
	if !strings.Contains(log, "export GITFLEET_SERVER=http://"+addr+" GITFLEET_TOKEN="+token) {
		t.Errorf("the banner does not say how to use gitfleet ctl:\n%s", log)
	}
	base := "http://" + addr
	// A repository of the demo's upstream host that is not there yet: the
	// addition is what is tested, not its clone.
	added := strings.TrimPrefix(upstream, "http://") + "/team/project"
	if code, out := ctlAs(t, base, token, "add", upstream+"/team/project.git", "team=core"); code != 0 || !strings.Contains(out, added) {
		t.Errorf("ctl add with the banner's token: exit %d:\n%s", code, out)
	}
	if code, out := ctlAs(t, base, "not-the-token", "rm", added); code != 1 || !strings.Contains(out, "wrong API token") {
		t.Errorf("ctl rm with another token: exit %d:\n%s", code, out)
	}
	eventually(t, 90*time.Second, "ctl fetch --wait of a demo repository", func() error {
		if code, out := ctlAs(t, base, token, "fetch", key, "--wait"); code != 0 {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		return nil
	})
}
