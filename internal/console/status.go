package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// A repository's public status, for the projects whose repositories the
// fleet mirrors: a page (/-/status/{key}) and a badge to embed in a README
// (/-/badge/{key}.svg). Both cost what the API's listing of one repository
// costs (no git, no log), are cached briefly by whoever asks, and show an
// error as its public class only.

// publicState is what the public status says of a repository, in a word,
// with the badge's color.
type publicState struct {
	Word, Color string
	// Class is the CSS class of the word on the status page.
	Class string
}

var (
	stateCurrent     = publicState{"current", "#2e7d32", "ok"}
	stateBehind      = publicState{"behind", "#b26a00", "behind"}
	stateFailing     = publicState{"failing", "#c62828", "failing"}
	stateNotMirrored = publicState{"not mirrored", "#6b7280", "none"}
)

// publicStateOf says where r stands: current when the full node vouches
// for it (verified_at recent, no change known since), failing when its
// upstream fails or its copy is corrupt, not mirrored before there is a
// copy to serve, and behind otherwise.
func publicStateOf(r api.Repo) publicState {
	switch {
	case r.State == repostate.Corrupt:
		return stateFailing
	case !r.Served && (r.State == repostate.Repairing || r.State == repostate.Unchecked):
		return stateBehind // a copy is there, checked before it is served again
	case !r.Served:
		return stateNotMirrored
	case r.State == repostate.Failing || r.State.Departed() || r.LastError != "":
		return stateFailing
	case r.Current:
		return stateCurrent
	}
	return stateBehind
}

// statusCache is how long browsers and proxies may keep a status or a
// badge: a README shown often asks the full node once a minute at most.
const statusCache = "public, max-age=60"

// publicKey is the key of a status or badge request: the path's, without
// a trailing ".git".
func publicKey(r *http.Request) string {
	return strings.TrimSuffix(r.PathValue("key"), ".git")
}

func (c *Console) status(w http.ResponseWriter, r *http.Request) {
	key := publicKey(r)
	repo, ok := c.src.Status(key)
	if !ok {
		c.render(w, r, http.StatusNotFound, "notfound", "Not mirrored", fmt.Sprintf("repository %s is not mirrored here", key))
		return
	}
	if repo.CloneURL == "" { // no --public-url: as the client reached us
		repo.CloneURL = "http://" + r.Host + "/" + repo.Key + ".git"
	}
	base := strings.TrimSuffix(strings.TrimSuffix(repo.CloneURL, ".git"), repo.Key)
	data := struct {
		api.Repo
		State                  publicState
		Badge, Page, Markdown  string
		BadgePath              string
		ErrorClass, ConsoleURL string
	}{Repo: repo, State: publicStateOf(repo), Badge: base + "-/badge/" + escapeKey(repo.Key) + ".svg",
		BadgePath: "/-/badge/" + escapeKey(repo.Key) + ".svg",
		Page:      base + "-/status/" + escapeKey(repo.Key), ErrorClass: api.PublicError(repo.LastError, repo.ErrorClass), ConsoleURL: repoHref(repo.Key)}
	data.Markdown = fmt.Sprintf("[![mirror: %s](%s)](%s)", data.State.Word, data.Badge, data.Page)
	w.Header().Set("Cache-Control", statusCache)
	c.render(w, r, http.StatusOK, "status", repo.Key, data)
}

func (c *Console) badge(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutSuffix(r.PathValue("key"), ".svg")
	state, code := stateNotMirrored, http.StatusNotFound
	if ok {
		if repo, found := c.src.Status(strings.TrimSuffix(key, ".git")); found {
			state, code = publicStateOf(repo), http.StatusOK
		}
	}
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Cache-Control", statusCache)
	w.WriteHeader(code) // a key not mirrored: 404, with a grey badge that says so
	_, _ = w.Write(badgeSVG("mirror", state))
}

// badgeSVG draws a badge of two parts, label and state, each as wide as
// its text at about 6.5 units a character (Verdana 11). Its texts are the
// console's own: nothing of the request is in it.
func badgeSVG(label string, s publicState) []byte {
	lw, rw := 10+len(label)*13/2, 10+len(s.Word)*13/2
	w := lw + rw
	return fmt.Appendf(nil, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="20" role="img" aria-label="%s: %s">`+
		`<title>%s: %s</title>`+
		`<rect width="%d" height="20" rx="3" fill="#555"/><rect x="%d" width="%d" height="20" rx="3" fill="%s"/>`+
		`<rect x="%d" width="4" height="20" fill="%s"/>`+
		`<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">`+
		`<text x="%d" y="14">%s</text><text x="%d" y="14">%s</text></g></svg>`,
		w, label, s.Word, label, s.Word, w, lw, rw, s.Color, lw, s.Color, lw/2, label, lw+rw/2, s.Word)
}

// RepoOf returns the key of the repository whose public status or badge r
// asks for, as the request writes it: what a full node that does not hold
// the repository relays to one that does (package fullnode), whose status
// it then shows. The rest of the console is answered where it arrives.
func RepoOf(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	if key, ok := strings.CutPrefix(r.URL.Path, "/-/status/"); ok {
		return strings.TrimSuffix(key, ".git"), key != ""
	}
	if key, ok := strings.CutPrefix(r.URL.Path, "/-/badge/"); ok {
		key, ok = strings.CutSuffix(key, ".svg")
		return strings.TrimSuffix(key, ".git"), ok && key != ""
	}
	return "", false
}
