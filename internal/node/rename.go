package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A renamed or transferred repository's git server redirects its old path
// (GitHub, GitLab and Gitea answer info/refs with a 301 or 302 to the new
// one). git follows no redirect here (gitcmd's http.followRedirects=false),
// so a check of the old path fails; the owner then asks the old path's
// info/refs once itself, following nothing, through the egress dialer
// (the policy applies to every hop), and reads the Location as hostile
// input (repokey.Redirect). A target on the same host is asked in turn,
// up to maxRedirectHops, for where a chain of renames ends; a loop, a
// target that is no repository, or one that does not answer as git does
// names nothing. A target on another host is reported and never asked.
// The key found goes to the coordinator in CheckResult.renamed_to.

// maxRedirectHops bounds the redirects a probe reads.
const maxRedirectHops = 5

// redirectProbeTimeout bounds one request of a probe.
const redirectProbeTimeout = 30 * time.Second

// renamedTo returns the key a failed check's upstream redirected to, or ""
// when err is no redirect or the redirect names no repository.
func (n *Node) renamedTo(ctx context.Context, key repokey.Key, url string, err error) string {
	if !gitcmd.Redirected(err) || !(strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://")) {
		return ""
	}
	to, perr := n.followRedirects(ctx, key, url)
	if perr != nil {
		n.log.Warn("the upstream redirects to no repository gitfleet follows", "key", key, "err", perr)
		return ""
	}
	n.log.Info("the upstream redirects: renamed", "key", key, "to", to)
	return to.String()
}

// followRedirects asks url's info/refs and the redirects' targets on its
// host, following none by itself, and returns the last key named.
func (n *Node) followRedirects(ctx context.Context, key repokey.Key, url string) (repokey.Key, error) {
	hc := &http.Client{
		Transport:     &http.Transport{DialContext: n.dialer.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer hc.CloseIdleConnections()
	opt := repokey.Options{AllowPrivate: n.cfg.AllowPrivate, Egress: n.cfg.Egress, Fold: n.cfg.Fold}
	seen := map[repokey.Key]bool{key: true}
	from, fromURL := key, url
	var last repokey.Key
	for hop := 0; ; hop++ {
		status, location, err := askRefs(ctx, hc, fromURL)
		if err != nil {
			return "", err
		}
		if status/100 == 2 && hop > 0 {
			return last, nil // the end of the chain answers
		}
		if status != http.StatusMovedPermanently && status != http.StatusFound && status != http.StatusTemporaryRedirect &&
			status != http.StatusPermanentRedirect && status != http.StatusSeeOther {
			return "", &redirectError{key: key, why: "the target answers HTTP " + http.StatusText(status)}
		}
		to, toURL, sameHost, err := repokey.Redirect(from, fromURL, location, opt)
		if err != nil {
			return "", err
		}
		if !sameHost {
			return to, nil // shown, never asked
		}
		if seen[to] {
			return "", &redirectError{key: key, why: "a loop of redirects through " + to.String()}
		}
		if hop+1 >= maxRedirectHops {
			return "", &redirectError{key: key, why: fmt.Sprintf("more than %d redirects", maxRedirectHops)}
		}
		seen[to] = true
		from, fromURL, last = to, toURL, to
	}
}

// askRefs asks url's info/refs as git's smart HTTP does, and returns the
// answer's status and Location.
func askRefs(ctx context.Context, hc *http.Client, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, redirectProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+repokey.RefsPath+"?service=git-upload-pack", nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("User-Agent", "git/gitfleet")
	req.Header.Set("Git-Protocol", "version=2")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// redirectError is a redirect that names no repository to follow.
type redirectError struct {
	key repokey.Key
	why string
}

func (e *redirectError) Error() string { return "redirect of " + e.key.String() + ": " + e.why }
