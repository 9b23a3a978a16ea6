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

// Listing an owner's repositories: a catalog's lister line (package
// catalog) names an organisation, a user or a group, and the coordinator
// asks its forge for every repository it has, page by page, with the
// feed's client (the same tokens, limits and backoff). A listing is all
// or nothing: a page that fails, a bound of pages reached, a cursor that
// comes back, fail the whole listing, so that the caller keeps its last
// good one rather than drop what a partial one would leave out.

// DefaultMaxOwnerPages bounds one listing: 1,000 pages are 100,000
// repositories on GitHub and GitLab.
const DefaultMaxOwnerPages = 1000

// OwnerLister is a client that lists an owner's repositories. Every
// client of this package is one.
type OwnerLister interface {
	Client
	// ListOwner lists the repositories of q.Owner. Repositories whose
	// names are not repository names below the owner are left out and
	// counted (Listing.Refused). On error nothing is listed.
	ListOwner(ctx context.Context, q OwnerQuery) (Listing, error)
}

// OwnerQuery is what ListOwner lists.
type OwnerQuery struct {
	// Owner is "org", "user" or GitLab's "group/sub".
	Owner string
	// Subgroups: the group's subgroups' projects too (GitLab).
	Subgroups bool
	// BeforePage, when set, is called before each page's request: a
	// caller that shares a request budget waits there for its turn. Its
	// error ends the listing.
	BeforePage func(ctx context.Context) error
}

// beforePage calls q.BeforePage, if set.
func (q OwnerQuery) beforePage(ctx context.Context) error {
	if q.BeforePage == nil {
		return nil
	}
	return q.BeforePage(ctx)
}

// Listing is an owner's repositories, as its forge listed them.
type Listing struct {
	Repos []OwnerRepo
	// Requests is how many requests the listing took.
	Requests int
	// Refused counts the repositories left out: a name that is not a
	// repository name below the owner (or carries a credential).
	Refused int
}

// OwnerRepo is a repository of a listing.
type OwnerRepo struct {
	// Path is its full name ("org/name", "group/sub/name").
	Path string
	// ID is the forge's stable ID (GitHub's databaseId, GitLab's and
	// Gitea's id); 0 when not given.
	ID       int64
	Fork     bool
	Archived bool
	// Size is its size in bytes as the forge counts it (GitHub's
	// diskUsage and Gitea's size are KiB); 0 when not given.
	Size   int64
	Topics []string
}

var errOwnerPages = errors.New("the listing goes on past its bound of pages; nothing listed")

// below tells whether path names a repository of owner: a valid name
// that starts with owner (in any case: hosts that fold case answer in
// their own) and has one more segment, or more with subgroups.
func below(path, owner string, subgroups bool) bool {
	if !ValidName(path) || len(path) <= len(owner)+1 || !strings.EqualFold(path[:len(owner)], owner) || path[len(owner)] != '/' {
		return false
	}
	return subgroups || !strings.Contains(path[len(owner)+1:], "/")
}

// keep adds r to l when its name is one of owner's, and counts it
// otherwise.
func (t *transport) keep(l *Listing, r OwnerRepo, owner string, subgroups bool) {
	if !below(r.Path, owner, subgroups) || len(t.screen(Answer{Pushed: []Push{{Path: r.Path}}}).Pushed) == 0 {
		l.Refused++
		return
	}
	for i := 0; i < len(r.Topics); i++ {
		if tp := r.Topics[i]; tp == "" || len(tp) > 50 || strings.ContainsAny(tp, "\x00\n\r\"") {
			r.Topics = append(r.Topics[:i], r.Topics[i+1:]...)
			i--
		}
	}
	l.Repos = append(l.Repos, r)
}

// GitHub: GraphQL, 100 repositories a query, by cursor.

const githubOwnerQuery = `query($login: String!, $after: String) { rateLimit { cost remaining resetAt limit } ` +
	`repositoryOwner(login: $login) { repositories(first: 100, after: $after, ownerAffiliations: OWNER) { ` +
	`pageInfo { hasNextPage endCursor } nodes { nameWithOwner databaseId isFork isArchived diskUsage ` +
	`repositoryTopics(first: 20) { nodes { topic { name } } } } } } }`

type ghOwnerPage struct {
	Data *struct {
		RateLimit *struct {
			Remaining *int    `json:"remaining"`
			ResetAt   *string `json:"resetAt"`
			Limit     *int    `json:"limit"`
		} `json:"rateLimit"`
		Owner *struct {
			Repositories *struct {
				PageInfo *struct {
					HasNextPage bool    `json:"hasNextPage"`
					EndCursor   *string `json:"endCursor"`
				} `json:"pageInfo"`
				Nodes []*struct {
					NameWithOwner string `json:"nameWithOwner"`
					DatabaseID    int64  `json:"databaseId"`
					IsFork        bool   `json:"isFork"`
					IsArchived    bool   `json:"isArchived"`
					DiskUsage     int64  `json:"diskUsage"`
					Topics        *struct {
						Nodes []*struct {
							Topic *struct {
								Name string `json:"name"`
							} `json:"topic"`
						} `json:"nodes"`
					} `json:"repositoryTopics"`
				} `json:"nodes"`
			} `json:"repositories"`
		} `json:"repositoryOwner"`
	} `json:"data"`
	Errors []gqlError `json:"errors"`
}

// ListOwner pages through repositoryOwner(login).repositories, 100 a
// query, each query costing GitHub's points for its 100 nodes.
func (g *githubClient) ListOwner(ctx context.Context, q OwnerQuery) (Listing, error) {
	owner := q.Owner
	if q.Subgroups || !githubName(owner, true) {
		return Listing{}, fmt.Errorf("forge %s: %q is not a GitHub owner (one name, no subgroups)", g.host, truncate(owner))
	}
	var l Listing
	var after *string
	seen := make(map[string]bool)
	for {
		if l.Requests >= g.maxOwnerPages {
			return Listing{}, fmt.Errorf("forge %s: owner %s: %w (%d)", g.host, owner, errOwnerPages, g.maxOwnerPages)
		}
		body, err := json.Marshal(struct {
			Query     string         `json:"query"`
			Variables map[string]any `json:"variables"`
		}{githubOwnerQuery, map[string]any{"login": owner, "after": after}})
		if err != nil {
			return Listing{}, err
		}
		if err := q.beforePage(ctx); err != nil {
			return Listing{}, err
		}
		var next *string
		l.Requests++
		err = g.do(ctx, request{method: http.MethodPost, url: g.endpoint, body: body}, func(resp response, ts *tokenState) error {
			var page ghOwnerPage
			if err := decodeStrict(resp.body, &page); err != nil {
				return err
			}
			for _, e := range page.Errors {
				if e.Type == "RATE_LIMITED" {
					now := g.clk.Now()
					g.spend(ts, now, now.Add(secondaryWait), "GraphQL RATE_LIMITED")
					return errSpent
				}
			}
			if page.Data != nil && page.Data.RateLimit != nil && page.Data.RateLimit.Remaining != nil && page.Data.RateLimit.ResetAt != nil {
				if at, err := time.Parse(time.RFC3339, *page.Data.RateLimit.ResetAt); err == nil {
					limit := 0
					if page.Data.RateLimit.Limit != nil {
						limit = *page.Data.RateLimit.Limit
					}
					g.noteBudget(ts, *page.Data.RateLimit.Remaining, limit, at)
					if *page.Data.RateLimit.Remaining == 0 {
						g.spend(ts, g.clk.Now(), at, "GraphQL rateLimit.remaining is 0")
					}
				}
			}
			if len(page.Errors) > 0 {
				e := page.Errors[0]
				if e.Type == "NOT_FOUND" {
					return fmt.Errorf("owner %s: not found (%s)", owner, truncate(e.Message))
				}
				return fmt.Errorf("owner %s: %d errors, the first: %s: %s", owner, len(page.Errors), truncate(e.Type), truncate(e.Message))
			}
			if page.Data == nil || page.Data.Owner == nil || page.Data.Owner.Repositories == nil || page.Data.Owner.Repositories.PageInfo == nil {
				return fmt.Errorf("owner %s: the answer is not repositoryOwner { repositories { pageInfo nodes } }", owner)
			}
			repos := page.Data.Owner.Repositories
			for _, n := range repos.Nodes {
				if n == nil {
					l.Refused++
					continue
				}
				r := OwnerRepo{Path: n.NameWithOwner, ID: n.DatabaseID, Fork: n.IsFork, Archived: n.IsArchived, Size: max(n.DiskUsage, 0) << 10}
				if n.Topics != nil {
					for _, tn := range n.Topics.Nodes {
						if tn != nil && tn.Topic != nil {
							r.Topics = append(r.Topics, tn.Topic.Name)
						}
					}
				}
				g.keep(&l, r, owner, false)
			}
			if repos.PageInfo.HasNextPage {
				if repos.PageInfo.EndCursor == nil || *repos.PageInfo.EndCursor == "" || len(repos.Nodes) == 0 {
					return fmt.Errorf("owner %s: a next page without a cursor or after an empty one", owner)
				}
				if seen[*repos.PageInfo.EndCursor] {
					return fmt.Errorf("owner %s: the cursor %q came back: a loop", owner, truncate(*repos.PageInfo.EndCursor))
				}
				seen[*repos.PageInfo.EndCursor] = true
				next = repos.PageInfo.EndCursor
			}
			return nil
		})
		if err != nil {
			return Listing{}, err
		}
		if next == nil {
			return l, nil
		}
		after = next
	}
}

// The REST forges: numbered pages.

// restOwners pages through a REST forge's listing of an owner's
// repositories.
type restOwners struct {
	t *transport
	// page is the URL of page n (from 1) of owner's repositories.
	page func(owner string, subgroups bool, n int) (*url.URL, error)
	// items reads a page's repositories.
	items func(body []byte) ([]json.RawMessage, error)
	// next is the number of the page after page n, 0 when n is the last.
	next func(h http.Header, n, items int) int
	// sizeUnit is what the size field counts in bytes (0: no size).
	sizeField string
	sizeUnit  int64
	// nameField, forkField and the others name the fields.
	nameField, forkField string
	subgroups            bool // the forge has subgroups (GitLab)
}

// restOwnerRepo is the fields the REST forges give a repository, under
// their names (decoded loosely: a missing field is its zero).
func (o *restOwners) decode(raw json.RawMessage) (OwnerRepo, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return OwnerRepo{}, errors.New("a repository is not a JSON object")
	}
	var r OwnerRepo
	if err := json.Unmarshal(obj[o.nameField], &r.Path); err != nil {
		return OwnerRepo{}, fmt.Errorf("a repository has no %s", o.nameField)
	}
	_ = json.Unmarshal(obj["id"], &r.ID)
	_ = json.Unmarshal(obj["archived"], &r.Archived)
	_ = json.Unmarshal(obj["topics"], &r.Topics)
	if raw, ok := obj[o.forkField]; ok {
		// A bool (Gitea's, Gitee's "fork") or the parent's object
		// (GitLab's forked_from_project, present only on forks).
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			r.Fork = b
		} else {
			r.Fork = string(raw) != "null"
		}
	}
	if o.sizeField != "" {
		var size int64
		if s, ok := obj["statistics"]; ok && o.sizeField == "repository_size" {
			var st map[string]json.RawMessage
			if json.Unmarshal(s, &st) == nil {
				_ = json.Unmarshal(st[o.sizeField], &size)
			}
		} else {
			_ = json.Unmarshal(obj[o.sizeField], &size)
		}
		r.Size = max(size, 0) * o.sizeUnit
	}
	return r, nil
}

// list pages through owner's repositories until the last page, or fails
// at the bound of pages.
func (o *restOwners) list(ctx context.Context, q OwnerQuery) (Listing, error) {
	owner, subgroups := q.Owner, q.Subgroups
	if subgroups && !o.subgroups {
		return Listing{}, fmt.Errorf("forge %s: /** lists a GitLab group's subgroups; this forge has none: use /*", o.t.host)
	}
	if !validPath(owner+"/x", 0) || !o.subgroups && strings.Contains(owner, "/") {
		return Listing{}, fmt.Errorf("forge %s: %q is not an owner of this forge", o.t.host, truncate(owner))
	}
	var l Listing
	for n := 1; n > 0; {
		if l.Requests >= o.t.maxOwnerPages {
			return Listing{}, fmt.Errorf("forge %s: owner %s: %w (%d)", o.t.host, owner, errOwnerPages, o.t.maxOwnerPages)
		}
		u, err := o.page(owner, subgroups, n)
		if err != nil {
			return Listing{}, err
		}
		if err := q.beforePage(ctx); err != nil {
			return Listing{}, err
		}
		next := 0
		l.Requests++
		err = o.t.do(ctx, request{method: http.MethodGet, url: u}, func(resp response, _ *tokenState) error {
			items, err := o.items(resp.body)
			if err != nil {
				return fmt.Errorf("owner %s, page %d: %w", owner, n, err)
			}
			for _, raw := range items {
				r, err := o.decode(raw)
				if err != nil {
					return fmt.Errorf("owner %s, page %d: %w", owner, n, err)
				}
				o.t.keep(&l, r, owner, subgroups)
			}
			if len(items) > 0 {
				next = o.next(resp.header, n, len(items))
			}
			return nil
		})
		if err != nil {
			return Listing{}, err
		}
		n = next
	}
	return l, nil
}

// gitlabGroupPage is GET /groups/:path/projects, the group's full path
// one escaped segment.
func gitlabGroupPage(api *url.URL) func(string, bool, int) (*url.URL, error) {
	return func(owner string, subgroups bool, n int) (*url.URL, error) {
		u := *api
		u.Path = api.Path + "/groups/" + owner + "/projects"
		u.RawPath = api.EscapedPath() + "/groups/" + url.PathEscape(owner) + "/projects"
		return pageOf(&u, url.Values{
			"include_subgroups": {strconv.FormatBool(subgroups)},
			"per_page":          {strconv.Itoa(gitlabPerPage)},
			"order_by":          {"id"},
			"sort":              {"asc"},
			"statistics":        {"true"},
		}, n), nil
	}
}

// orgReposPage is GET /orgs/:org/repos (Gitea's limit=, Gitee's
// per_page=).
func orgReposPage(api *url.URL, sizeParam string, size int) func(string, bool, int) (*url.URL, error) {
	return func(owner string, _ bool, n int) (*url.URL, error) {
		return pageOf(api.JoinPath("orgs", owner, "repos"), url.Values{sizeParam: {strconv.Itoa(size)}}, n), nil
	}
}

func (c *gitlabClient) ListOwner(ctx context.Context, q OwnerQuery) (Listing, error) {
	return c.owners.list(ctx, q)
}

func (c *giteaClient) ListOwner(ctx context.Context, q OwnerQuery) (Listing, error) {
	return c.owners.list(ctx, q)
}

// giteeClient is a Lookup and an OwnerLister.
type giteeClient struct {
	restLookup
	owners restOwners
}

func (c *giteeClient) ListOwner(ctx context.Context, q OwnerQuery) (Listing, error) {
	return c.owners.list(ctx, q)
}

const giteePerPage = 100
