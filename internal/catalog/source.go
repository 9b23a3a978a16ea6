package catalog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// headRef is where Source keeps the remote's HEAD.
const headRef = "refs/gitfleet/catalog"

// Source is the coordinator's bare clone of the catalog repository.
type Source struct {
	dir    string
	remote string   // without credentials: git's command line and logs show it
	auth   []string // the credentials, as git's environment (see remoteOf)
	git    *gitcmd.Runner
	log    *slog.Logger
	mu     sync.Mutex // one fetch at a time
}

// OpenSource prepares a bare clone of remote in <dataDir>/catalog.git
// (created if missing, reused otherwise). remote is a URL or a local path
// (the operator gave it; git must allow the file protocol for a path).
func OpenSource(dataDir, remote string, git *gitcmd.Runner, log *slog.Logger) (*Source, error) {
	remote, auth, err := remoteOf(remote)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// git runs in a neutral directory (package gitcmd): give it absolute paths.
	absData, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("catalog: data directory %q: %w", dataDir, err)
	}
	dataDir = absData
	s := &Source{dir: filepath.Join(dataDir, "catalog.git"), remote: remote, auth: auth, git: git, log: log}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	// init on an existing repository only re-checks it.
	err = git.Run(context.Background(), gitcmd.Cmd{Name: "init", Flags: []string{"--bare", "--quiet", "--template="}, Args: []string{s.dir}})
	if err != nil {
		return nil, fmt.Errorf("catalog: create the catalog clone in %s: %w", s.dir, err)
	}
	return s, nil
}

// remoteOf is the catalog repository remote as git is given it: a URL
// without its credentials, a path made absolute (git runs in a neutral
// directory). The user and password of an http(s) URL go to git in auth,
// its environment (http.<url>.extraHeader, Basic), never on its command
// line, which every user of the machine can read (ps, /proc/*/cmdline).
func remoteOf(remote string) (clean string, auth []string, err error) {
	if remote == "" {
		return "", nil, fmt.Errorf("catalog: no catalog repository given")
	}
	if !IsURL(remote) {
		abs, err := filepath.Abs(remote)
		if err != nil {
			return "", nil, fmt.Errorf("catalog: catalog repository %q: %w", remote, err)
		}
		return abs, nil, nil
	}
	if !strings.Contains(remote, "://") {
		return remote, nil, nil // scp-like: a user name, never a password
	}
	u, err := url.Parse(remote)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text quotes the URL, password and all
		}
		return "", nil, fmt.Errorf("catalog: catalog repository %s: %w", repokey.Redact(remote), err)
	}
	if u.User == nil {
		return remote, nil, nil
	}
	switch u.Scheme {
	case "http", "https":
		user := u.User.Username()
		pass, _ := u.User.Password()
		u.User = nil
		clean = u.String()
		header := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
		return clean, []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http." + clean + ".extraHeader", "GIT_CONFIG_VALUE_0=" + header}, nil
	case "ssh", "git+ssh", "ssh+git":
		if _, hasPass := u.User.Password(); hasPass {
			return "", nil, fmt.Errorf("catalog: catalog repository %s: a password in an ssh URL is not used: give ssh a key", repokey.Redact(remote))
		}
		return remote, nil, nil // the user name ssh logs in as
	}
	return "", nil, fmt.Errorf("catalog: catalog repository %s: credentials in a %s URL: only http(s) URLs may carry them", repokey.Redact(remote), u.Scheme)
}

// SourceGit returns the git that reads a catalog repository: the
// operator's own remote (a path or a URL), reached directly rather than
// through the egress policy meant for upstreams, with the file protocol
// allowed for a path. Each git process may run for timeout. tmp is where
// its fetches write curl's trace of the headers (TempDir; "": the
// machine's temporary directory, for a one-off check).
func SourceGit(timeout time.Duration, tmp string) *gitcmd.Runner {
	return gitcmd.New(gitcmd.Direct(), gitcmd.Options{Protocols: "file:" + gitcmd.DefaultProtocols, Timeout: timeout, TempDir: tmp})
}

// TempDir is the directory of dataDir where the catalog's git writes
// curl's traces (SourceGit), made empty by CleanTempDir.
func TempDir(dataDir string) string { return filepath.Join(dataDir, "catalog.tmp") }

// CleanTempDir empties TempDir(dataDir) of what a killed process left
// there, creating it if need be, and returns its absolute path (git runs
// in a neutral directory).
func CleanTempDir(dataDir string) (string, error) {
	dir, err := filepath.Abs(TempDir(dataDir))
	if err != nil {
		return "", fmt.Errorf("catalog: temporary directory: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("catalog: empty %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	return dir, nil
}

// CheckSource tells whether the catalog repository remote (a URL or a
// path, as OpenSource takes it) can be read, as the coordinator's first
// fetch would read it: it lists the remote's HEAD and returns its commit.
// git must allow the file protocol for a path.
func CheckSource(ctx context.Context, git *gitcmd.Runner, remote string) (string, error) {
	remote, auth, err := remoteOf(remote)
	if err != nil {
		return "", err
	}
	out, err := git.Output(ctx, gitcmd.Cmd{Name: "ls-remote", Args: []string{remote, "HEAD"}, Env: auth})
	if err != nil {
		return "", fmt.Errorf("catalog: read %s: %w", remote, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if commit, ok := strings.CutSuffix(line, "\tHEAD"); ok {
			return commit, nil
		}
	}
	return "", fmt.Errorf("catalog: %s has no HEAD: commit the catalog to its default branch", remote)
}

// IsURL tells a URL ("https://...", scp-like "git@host:path") from a path.
func IsURL(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	colon := strings.Index(s, ":")
	return colon > 0 && !strings.Contains(s[:colon], "/")
}

// Dir is the git directory of the clone, for Load and Update.
func (s *Source) Dir() string { return s.dir }

// Fetch fetches the remote's HEAD (its default branch) and returns its
// commit ID. The clone's ref moves only when the fetch succeeded, so a
// failure leaves the previous commit readable.
func (s *Source) Fetch(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.git.Run(ctx, gitcmd.Cmd{GitDir: s.dir, Name: "fetch",
		Flags: []string{"--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc"},
		Args:  []string{s.remote, "+HEAD:" + headRef}, Env: s.auth})
	if err != nil {
		// The caller says what it keeps (the previous catalog, or none).
		return "", fmt.Errorf("catalog: fetch %s: %w", s.remote, err)
	}
	commit, err := resolveCommit(ctx, s.git, s.dir, headRef)
	if err != nil {
		return "", err
	}
	s.log.Debug("catalog fetched", "remote", s.remote, "commit", commit)
	return commit, nil
}
