package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// restBatch is how many repositories one lookup of a REST forge takes:
// each is a request, paced, so a batch is kept short enough to finish
// well within a minute.
const restBatch = 20

// restRepo says where a REST forge keeps a repository's name and time,
// and a fork's parent: the object parentField, named by its nameField
// (GitLab's forked_from_project, Gitea's and Gitee's parent).
type restRepo struct {
	nameField, timeField string
	parentField          string
}

// parent reads the name of a fork's parent from a repository object that
// decode accepted: "" when it is no fork, or the parent is not an object
// with a string name (a parent is a hint; a bad one is not an error).
func (f restRepo) parent(raw json.RawMessage) string {
	if f.parentField == "" {
		return ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	var parent map[string]json.RawMessage
	if json.Unmarshal(obj[f.parentField], &parent) != nil {
		return ""
	}
	var name string
	if json.Unmarshal(parent[f.nameField], &name) != nil {
		return ""
	}
	return name
}

// repoHeadAndFlags reads what the REST forges (GitHub's, GitLab's,
// Gitea's, Gitee's) say of a repository object's default branch
// (default_branch, "" when absent or not a valid branch name), whether
// it is archived or disabled (archived, disabled: booleans, absent false)
// and its stable number (id; 0 when absent or not a positive integer).
func repoHeadAndFlags(raw json.RawMessage) (string, Flag, int64) {
	var obj struct {
		DefaultBranch *string `json:"default_branch"`
		Archived      *bool   `json:"archived"`
		Disabled      *bool   `json:"disabled"`
		ID            *int64  `json:"id"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return "", Flag{}, 0
	}
	var id int64
	if obj.ID != nil && *obj.ID > 0 {
		id = *obj.ID
	}
	var head string
	if obj.DefaultBranch != nil && ValidBranch(*obj.DefaultBranch) {
		head = *obj.DefaultBranch
	}
	return head, Flag{Archived: obj.Archived != nil && *obj.Archived, Disabled: obj.Disabled != nil && *obj.Disabled}, id
}

// decode reads one repository object: its name (required, a valid path)
// and its time (null or absent: never pushed, zero).
func (f restRepo) decode(raw json.RawMessage, now time.Time) (string, time.Time, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return "", time.Time{}, errors.New("a repository is not a JSON object")
	}
	var name string
	if err := json.Unmarshal(obj[f.nameField], &name); err != nil {
		return "", time.Time{}, fmt.Errorf("a repository has no %s", f.nameField)
	}
	if !validPath(name, 0) {
		return "", time.Time{}, fmt.Errorf("%s: %w", f.nameField, errBadName)
	}
	rawTime, ok := obj[f.timeField]
	if !ok || string(rawTime) == "null" {
		return name, time.Time{}, nil
	}
	var s string
	if err := json.Unmarshal(rawTime, &s); err != nil {
		return "", time.Time{}, fmt.Errorf("%s: %s is not a string", name, f.timeField)
	}
	at, err := parseTime(s, now)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%s: %s: %w", name, f.timeField, err)
	}
	return name, at, nil
}

// restLookup asks a REST forge about repositories one request each.
type restLookup struct {
	*transport
	repo restRepo
	// repoURL is the URL of one repository, false when the forge cannot
	// name path.
	repoURL func(path string) (*url.URL, bool)
	// pathOf is repoURL's inverse: the path a URL of the API names, false
	// when it names no repository.
	pathOf func(u *url.URL) (string, bool)
	// idURL is the URL of the repository the forge numbers id (nil: the
	// API has no lookup by number).
	idURL func(id int64) *url.URL
}

// movedTo reads where a lookup of u was redirected (location, hostile): the
// repository's new path, when the target is a repository URL of the same
// API (scheme, host and base); false for anything else, which is never
// followed nor shown.
func (l *restLookup) movedTo(u *url.URL, location string) (string, bool) {
	loc, err := url.Parse(location)
	if err != nil || location == "" || loc.User != nil || loc.Fragment != "" {
		return "", false
	}
	for _, seg := range strings.Split(loc.EscapedPath(), "/") {
		if seg == "." || seg == ".." {
			return "", false
		}
	}
	t := u.ResolveReference(loc)
	if t.Scheme != u.Scheme || !strings.EqualFold(t.Host, u.Host) || t.User != nil {
		return "", false
	}
	t.RawQuery = ""
	return l.pathOf(t)
}

func (l *restLookup) BatchSize() int { return restBatch }

// Askable says whether the forge's API can name path.
func (l *restLookup) Askable(path string) bool {
	_, ok := l.repoURL(path)
	return ok
}

// PushedAt asks about each repository in turn, paced. A 404 is a missing
// repository; a name that differs other than in case is a rename.
func (l *restLookup) PushedAt(ctx context.Context, paths []string) (Answer, error) {
	if len(paths) > restBatch {
		return Answer{}, fmt.Errorf("forge %s: %d repositories in one lookup, at most %d", l.host, len(paths), restBatch)
	}
	var a Answer
	for _, path := range paths {
		u, ok := l.repoURL(path)
		if !ok {
			continue
		}
		if err := l.lookup(ctx, path, u, &a); err != nil {
			return Answer{}, err
		}
	}
	return l.screen(a), nil
}

// PushedAtByID asks about the repository the forge numbers id, which the
// caller knew as path: the forge's answer under another name is a rename
// of path, even when path itself answers 404 or names another repository
// now (one made anew under the name). False when the forge's API has no
// lookup by number.
func (l *restLookup) PushedAtByID(ctx context.Context, path string, id int64) (Answer, bool, error) {
	if l.idURL == nil || id <= 0 {
		return Answer{}, false, nil
	}
	var a Answer
	if err := l.lookup(ctx, path, l.idURL(id), &a); err != nil {
		return Answer{}, true, err
	}
	return l.screen(a), true, nil
}

// lookup asks u about the repository the caller knows as path, and adds
// the forge's answer to a.
func (l *restLookup) lookup(ctx context.Context, path string, u *url.URL, a *Answer) error {
	return l.do(ctx, request{method: http.MethodGet, url: u, accept404: true, acceptMoved: true}, func(resp response, _ *tokenState) error {
		if resp.status == http.StatusNotFound {
			a.Missing = append(a.Missing, path)
			return nil
		}
		if moved(resp.status) {
			// The forge's API redirects a renamed repository's old
			// path (Gitea, GitHub's REST): its new name, never
			// followed (the token would go along).
			if to, ok := l.movedTo(u, resp.header.Get("Location")); ok && validPath(to, 0) && !strings.EqualFold(to, path) {
				a.Renamed = append(a.Renamed, Rename{From: path, To: to})
			} else {
				a.Refused++
			}
			return nil
		}
		if err := decodeStrict(resp.body, new(json.RawMessage)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		name, at, err := l.repo.decode(resp.body, l.clk.Now())
		if errors.Is(err, errBadName) {
			a.Refused++ // unknown: not a change, and its name goes nowhere
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if p := l.repo.parent(resp.body); p != "" {
			a.Forks = append(a.Forks, Fork{Path: path, Parent: p}) // checked by Parents
		}
		head, fl, id := repoHeadAndFlags(resp.body)
		if id > 0 {
			a.IDs = append(a.IDs, RepoID{Path: path, ID: id})
		}
		if head != "" {
			a.Heads = append(a.Heads, Head{Path: path, Branch: head})
		}
		if fl.Archived || fl.Disabled {
			fl.Path = path
			a.Flags = append(a.Flags, fl)
		}
		switch {
		case !strings.EqualFold(name, path):
			a.Renamed = append(a.Renamed, Rename{From: path, To: name, At: at})
		case !at.IsZero():
			a.Pushed = append(a.Pushed, Push{Path: path, At: at})
		}
		return nil
	})
}

// restLister pages through a listing of repositories, most recently
// active first.
type restLister struct {
	*transport
	repo restRepo
	// page is the URL of page n (from 1) of the listing since since.
	page func(since time.Time, n int) *url.URL
	// items reads a page's repositories.
	items func(body []byte) ([]json.RawMessage, error)
	// next returns the number of the page after page n, 0 when n is the
	// last.
	next func(h http.Header, n, items int) int
}

// ChangedSince pages through the listing until it reaches a repository
// older than since, the last page, or the bound of pages (Truncated).
// A repository may appear on two pages (activity moves it up while the
// listing is read): PushTimes keeps its latest time.
func (l *restLister) ChangedSince(ctx context.Context, since time.Time) (Answer, error) {
	var a Answer
	for n := 1; n > 0; {
		if n > l.maxPages {
			a.Truncated = true
			break
		}
		next := 0
		err := l.do(ctx, request{method: http.MethodGet, url: l.page(since, n)}, func(resp response, _ *tokenState) error {
			items, err := l.items(resp.body)
			if err != nil {
				return fmt.Errorf("page %d: %w", n, err)
			}
			now := l.clk.Now()
			older := false
			for _, raw := range items {
				name, at, err := l.repo.decode(raw, now)
				if err != nil {
					return fmt.Errorf("page %d: %w", n, err)
				}
				if at.Before(since) {
					older = true // the rest is older still
					continue
				}
				a.Pushed = append(a.Pushed, Push{Path: name, At: at})
			}
			if !older {
				next = l.next(resp.header, n, len(items))
			}
			return nil
		})
		if err != nil {
			return Answer{}, err
		}
		n = next
	}
	return l.screen(a), nil
}

// pageOf sets the page parameter of a copy of u.
func pageOf(u *url.URL, q url.Values, n int) *url.URL {
	c := *u
	q.Set("page", strconv.Itoa(n))
	c.RawQuery = q.Encode()
	return &c
}

// nextWhenFull: the next page exists while pages come full.
func nextWhenFull(size int) func(http.Header, int, int) int {
	return func(_ http.Header, n, items int) int {
		if items < size {
			return 0
		}
		return n + 1
	}
}

// GitLab.

const gitlabPerPage = 100

func newGitLab(f Forge, t *transport) Client {
	t.auth = func(r *http.Request, s string) { r.Header.Set("Authorization", "Bearer "+s) }
	repo := restRepo{nameField: "path_with_namespace", timeField: "last_activity_at"}
	// GET /projects/:path has forked_from_project; the listing's simple
	// view has not.
	lookupRepo := repo
	lookupRepo.parentField = "forked_from_project"
	return &gitlabClient{
		restLookup: restLookup{transport: t, repo: lookupRepo, repoURL: func(path string) (*url.URL, bool) {
			if !validPath(path, 0) {
				return nil, false
			}
			// The project's full path is one segment, its slashes escaped.
			u := *f.API
			u.Path = f.API.Path + "/projects/" + path
			u.RawPath = f.API.EscapedPath() + "/projects/" + url.PathEscape(path)
			return &u, true
		}, pathOf: func(u *url.URL) (string, bool) {
			rest, ok := strings.CutPrefix(u.EscapedPath(), f.API.EscapedPath()+"/projects/")
			if !ok || strings.Contains(rest, "/") {
				return "", false
			}
			p, err := url.PathUnescape(rest)
			return p, err == nil && validPath(p, 0)
		}, idURL: func(id int64) *url.URL { return f.API.JoinPath("projects", strconv.FormatInt(id, 10)) }},
		restLister: restLister{transport: t, repo: repo,
			page: func(since time.Time, n int) *url.URL {
				return pageOf(f.API.JoinPath("projects"), url.Values{
					"last_activity_after": {since.UTC().Format(time.RFC3339)},
					"order_by":            {"last_activity_at"},
					"sort":                {"desc"},
					"simple":              {"true"},
					"per_page":            {strconv.Itoa(gitlabPerPage)},
				}, n)
			},
			items: jsonArray,
			next:  gitlabNext,
		},
		owners: restOwners{t: t, page: gitlabGroupPage(f.API), items: jsonArray, next: gitlabNext,
			nameField: "path_with_namespace", forkField: "forked_from_project", sizeField: "repository_size", sizeUnit: 1, subgroups: true},
	}
}

// gitlabClient is a Lookup (GET /projects/:path) and a Lister
// (GET /projects?last_activity_after=).
type gitlabClient struct {
	restLookup
	restLister
	owners restOwners
}

// Ready is the transport's, which both halves share.
func (c *gitlabClient) Ready(now time.Time) time.Time { return c.restLookup.Ready(now) }

// Budgets and PollInterval are the transport's too.
func (c *gitlabClient) Budgets() []TokenBudget      { return c.restLookup.Budgets() }
func (c *gitlabClient) PollInterval() time.Duration { return c.restLookup.PollInterval() }

// gitlabNext reads X-Next-Page: the next page's number, empty on the last
// page. The next URL is built here, never taken from a Link header, so
// that an answer cannot send the token elsewhere. Without the header (a
// proxy dropped it), full pages go on.
func gitlabNext(h http.Header, n, items int) int {
	if _, ok := h["X-Next-Page"]; !ok {
		return nextWhenFull(gitlabPerPage)(h, n, items)
	}
	next, err := strconv.Atoi(h.Get("X-Next-Page"))
	if err != nil || next <= n {
		return 0
	}
	return next
}

func jsonArray(body []byte) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := decodeStrict(body, &items); err != nil {
		return nil, err
	}
	if items == nil {
		return nil, errors.New("the answer is not a JSON array")
	}
	return items, nil
}

// Gitea and Forgejo.

const giteaPerPage = 50

// giteaClient is a Lookup (GET /repos/:owner/:repo) and a Lister
// (GET /repos/search?sort=updated). Gitea has no push time: updated_at is
// the last change of the repository, pushes included.
type giteaClient struct {
	restLookup
	restLister
	owners restOwners
}

func (c *giteaClient) Ready(now time.Time) time.Time { return c.restLookup.Ready(now) }
func (c *giteaClient) Budgets() []TokenBudget        { return c.restLookup.Budgets() }
func (c *giteaClient) PollInterval() time.Duration   { return c.restLookup.PollInterval() }

func newGitea(f Forge, t *transport) Client {
	t.auth = func(r *http.Request, s string) { r.Header.Set("Authorization", "token "+s) }
	repo := restRepo{nameField: "full_name", timeField: "updated_at"}
	lookupRepo := repo
	lookupRepo.parentField = "parent"
	return &giteaClient{
		restLookup: restLookup{transport: t, repo: lookupRepo, repoURL: ownerRepoURL(f.API), pathOf: ownerRepoPath(f.API),
			idURL: func(id int64) *url.URL { return f.API.JoinPath("repositories", strconv.FormatInt(id, 10)) }},
		restLister: restLister{transport: t, repo: repo,
			page: func(_ time.Time, n int) *url.URL {
				return pageOf(f.API.JoinPath("repos", "search"), url.Values{
					"sort": {"updated"}, "order": {"desc"}, "limit": {strconv.Itoa(giteaPerPage)},
				}, n)
			},
			items: giteaItems,
			next:  nextWhenFull(giteaPerPage),
		},
		owners: restOwners{t: t, page: orgReposPage(f.API, "limit", giteaPerPage), items: jsonArray, next: nextWhenFull(giteaPerPage),
			nameField: "full_name", forkField: "fork", sizeField: "size", sizeUnit: 1 << 10},
	}
}

// giteaItems reads {"ok": true, "data": [...]}.
func giteaItems(body []byte) ([]json.RawMessage, error) {
	var page struct {
		OK   *bool             `json:"ok"`
		Data []json.RawMessage `json:"data"`
	}
	if err := decodeStrict(body, &page); err != nil {
		return nil, err
	}
	if page.OK == nil || !*page.OK || page.Data == nil {
		return nil, errors.New(`the answer is not {"ok": true, "data": [...]}`)
	}
	return page.Data, nil
}

// ownerRepoURL is base/repos/OWNER/REPO.
func ownerRepoURL(base *url.URL) func(string) (*url.URL, bool) {
	return func(path string) (*url.URL, bool) {
		if !validPath(path, 2) {
			return nil, false
		}
		owner, name, _ := strings.Cut(path, "/")
		return base.JoinPath("repos", owner, name), true
	}
}

// ownerRepoPath is ownerRepoURL's inverse: OWNER/REPO of base/repos/OWNER/REPO.
func ownerRepoPath(base *url.URL) func(*url.URL) (string, bool) {
	return func(u *url.URL) (string, bool) {
		rest, ok := strings.CutPrefix(u.EscapedPath(), base.EscapedPath()+"/repos/")
		return rest, ok && validPath(rest, 2)
	}
}

// Gitee.

func newGitee(f Forge, t *transport) Client {
	// Gitee v5 takes the token as a query parameter; errors name the URL
	// before the token is added (see transport.send).
	t.auth = func(r *http.Request, s string) {
		q := r.URL.Query()
		q.Set("access_token", s)
		r.URL.RawQuery = q.Encode()
	}
	return &giteeClient{
		restLookup: restLookup{transport: t, repo: restRepo{nameField: "full_name", timeField: "pushed_at", parentField: "parent"}, repoURL: ownerRepoURL(f.API), pathOf: ownerRepoPath(f.API)},
		owners: restOwners{t: t, page: orgReposPage(f.API, "per_page", giteePerPage), items: jsonArray, next: nextWhenFull(giteePerPage),
			nameField: "full_name", forkField: "fork"},
	}
}
