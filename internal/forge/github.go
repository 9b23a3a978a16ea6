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

// githubBatch is the most lookups in one GraphQL query: a query of
// lookups without connections costs 1 point whatever their number, and
// GitHub's node limit allows this many.
const githubBatch = 100

// githubClient asks GitHub's GraphQL API for pushedAt (and the parent of
// a fork), githubBatch repositories a query.
type githubClient struct {
	*transport
	endpoint *url.URL
}

func newGitHub(f Forge, t *transport) Client {
	t.auth = func(r *http.Request, s string) { r.Header.Set("Authorization", "bearer "+s) }
	return &githubClient{transport: t, endpoint: f.API.JoinPath("graphql")}
}

func (g *githubClient) BatchSize() int { return githubBatch }

// PushedAt asks for up to 100 repositories in one query.
func (g *githubClient) PushedAt(ctx context.Context, paths []string) (Answer, error) {
	if len(paths) > githubBatch {
		return Answer{}, fmt.Errorf("forge %s: %d repositories in one lookup, at most %d", g.host, len(paths), githubBatch)
	}
	body, asked := githubQuery(paths)
	if len(asked) == 0 {
		return Answer{}, nil
	}
	var ans Answer
	err := g.do(ctx, request{method: http.MethodPost, url: g.endpoint, body: body}, func(resp response, ts *tokenState) error {
		now := g.clk.Now()
		a, rl, err := parseGitHub(resp.body, asked, now)
		if rl.known {
			g.noteBudget(ts, rl.remaining, 0, rl.resetAt)
		}
		if rl.known && rl.remaining == 0 {
			g.spend(ts, now, rl.resetAt, "GraphQL rateLimit.remaining is 0")
		}
		if errors.Is(err, errGraphQLLimited) {
			g.spend(ts, now, now.Add(secondaryWait), "GraphQL RATE_LIMITED")
			return errSpent
		}
		if err != nil {
			return fmt.Errorf("GraphQL answer: %w", err)
		}
		ans = a
		return nil
	})
	if err != nil {
		return Answer{}, err
	}
	return g.screen(ans), nil
}

// Askable: GitHub names a repository owner/name, no more segments.
func (g *githubClient) Askable(path string) bool { return githubAskable(path) }

func githubAskable(path string) bool {
	owner, name, ok := strings.Cut(path, "/")
	return ok && githubName(owner, true) && githubName(name, false)
}

// githubName checks a GitHub owner or repository name: what GitHub
// allows, so that nothing else reaches the query (it is passed as a
// variable anyway).
func githubName(s string, owner bool) bool {
	if s == "" || len(s) > 100 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
		case (r == '.' || r == '_') && !owner:
		default:
			return false
		}
	}
	return true
}

// githubQuery builds the query of aliased lookups r0, r1, ... with the
// names as variables, and returns the paths asked, in alias order.
func githubQuery(paths []string) (body []byte, asked []string) {
	var decl, sel strings.Builder
	vars := make(map[string]string, 2*len(paths))
	for _, p := range paths {
		if !githubAskable(p) {
			continue
		}
		owner, name, _ := strings.Cut(p, "/")
		i := strconv.Itoa(len(asked))
		if len(asked) > 0 {
			decl.WriteString(", ")
		}
		decl.WriteString("$o" + i + ": String!, $n" + i + ": String!")
		sel.WriteString(" r" + i + ": repository(owner: $o" + i + ", name: $n" + i + ") { pushedAt nameWithOwner parent { nameWithOwner } defaultBranchRef { name } isArchived isDisabled databaseId }")
		vars["o"+i], vars["n"+i] = owner, name
		asked = append(asked, p)
	}
	if len(asked) == 0 {
		return nil, nil
	}
	q := "query(" + decl.String() + ") { rateLimit { cost remaining resetAt limit }" + sel.String() + " }"
	body, err := json.Marshal(struct {
		Query     string            `json:"query"`
		Variables map[string]string `json:"variables"`
	}{q, vars})
	if err != nil {
		panic(err) // strings always marshal
	}
	return body, asked
}

// errGraphQLLimited: the answer is GraphQL's RATE_LIMITED error.
var errGraphQLLimited = errors.New("GraphQL rate limit spent")

type gqlError struct {
	Type    string `json:"type"`
	Path    []any  `json:"path"`
	Message string `json:"message"`
}

// gqlNode is one field of an answer's data: a repository lookup
// (pushedAt, nameWithOwner, parent, defaultBranchRef, isArchived,
// isDisabled, databaseId) or rateLimit. One type for both lets the answer be decoded
// in one pass; which fields must be there is checked after. parent and
// defaultBranchRef are objects, not connections: asking for them leaves
// the query's cost at 1 point.
type gqlNode struct {
	PushedAt      *string    `json:"pushedAt"`
	NameWithOwner *string    `json:"nameWithOwner"`
	Parent        *gqlParent `json:"parent"`
	DefaultBranch *gqlRef    `json:"defaultBranchRef"`
	IsArchived    *bool      `json:"isArchived"`
	IsDisabled    *bool      `json:"isDisabled"`
	DatabaseID    *int64     `json:"databaseId"`
	Cost          *int       `json:"cost"`
	Remaining     *int       `json:"remaining"`
	ResetAt       *string    `json:"resetAt"`
	Limit         *int       `json:"limit"`
}

// gqlRef is a repository's default branch: null when it has none (empty).
type gqlRef struct {
	Name *string `json:"name"`
}

// gqlParent is a fork's parent: null when the repository is no fork.
type gqlParent struct {
	NameWithOwner *string `json:"nameWithOwner"`
}

// rateInfo is GraphQL's rateLimit, when the answer has it.
type rateInfo struct {
	known     bool
	remaining int
	resetAt   time.Time
}

// parseGitHub reads the answer to a query of asked (alias ri is
// asked[i]). Anything that is not the shape asked for is an error; a
// lookup answered null with a NOT_FOUND error is a missing repository,
// one answered null otherwise is unknown.
func parseGitHub(body []byte, asked []string, now time.Time) (Answer, rateInfo, error) {
	var top struct {
		Data   map[string]*gqlNode `json:"data"`
		Errors []gqlError          `json:"errors"`
	}
	if err := decodeStrict(body, &top); err != nil {
		return Answer{}, rateInfo{}, err
	}
	errType := map[string]string{}
	var general []gqlError
	for _, e := range top.Errors {
		if e.Type == "RATE_LIMITED" {
			return Answer{}, rateInfo{}, errGraphQLLimited
		}
		if len(e.Path) > 0 {
			if alias, ok := e.Path[0].(string); ok {
				errType[alias] = e.Type
				continue
			}
		}
		general = append(general, e)
	}
	if top.Data == nil {
		if len(top.Errors) > 0 {
			e := top.Errors[0]
			return Answer{}, rateInfo{}, fmt.Errorf("no data, %d errors, the first: %s: %s", len(top.Errors), truncate(e.Type), truncate(e.Message))
		}
		return Answer{}, rateInfo{}, errors.New("no data and no errors")
	}
	if len(general) > 0 {
		return Answer{}, rateInfo{}, fmt.Errorf("%d errors about the query, the first: %s: %s", len(general), truncate(general[0].Type), truncate(general[0].Message))
	}
	var rl rateInfo
	for k, n := range top.Data {
		if k == "rateLimit" {
			if n == nil || n.Remaining == nil || n.ResetAt == nil {
				return Answer{}, rateInfo{}, errors.New("rateLimit is not {cost remaining resetAt limit}")
			}
			at, err := time.Parse(time.RFC3339, *n.ResetAt)
			if err != nil {
				return Answer{}, rateInfo{}, fmt.Errorf("rateLimit.resetAt: %w", err)
			}
			rl = rateInfo{known: true, remaining: *n.Remaining, resetAt: at}
			continue
		}
		if i, ok := aliasIndex(k); !ok || i >= len(asked) {
			return Answer{}, rateInfo{}, fmt.Errorf("data has %q, which was not asked", truncate(k))
		}
	}
	if !rl.known {
		return Answer{}, rateInfo{}, errors.New("data has no rateLimit")
	}
	var a Answer
	for i, path := range asked {
		alias := "r" + strconv.Itoa(i)
		r, ok := top.Data[alias]
		if !ok {
			continue
		}
		if r == nil {
			if errType[alias] == "NOT_FOUND" {
				a.Missing = append(a.Missing, path)
			}
			continue
		}
		if r.NameWithOwner == nil || !validPath(*r.NameWithOwner, 2) {
			a.Refused++ // unknown: not a change, and its name goes nowhere
			continue
		}
		var at time.Time // zero: never pushed
		if r.PushedAt != nil {
			var err error
			if at, err = parseTime(*r.PushedAt, now); err != nil {
				return Answer{}, rl, fmt.Errorf("%s.pushedAt: %w", alias, err)
			}
		}
		if r.Parent != nil && r.Parent.NameWithOwner != nil {
			// Checked by Parents, with the other keys.
			a.Forks = append(a.Forks, Fork{Path: path, Parent: *r.Parent.NameWithOwner})
		}
		if r.DefaultBranch != nil && r.DefaultBranch.Name != nil && ValidBranch(*r.DefaultBranch.Name) {
			a.Heads = append(a.Heads, Head{Path: path, Branch: *r.DefaultBranch.Name})
		}
		if r.DatabaseID != nil && *r.DatabaseID > 0 {
			a.IDs = append(a.IDs, RepoID{Path: path, ID: *r.DatabaseID})
		}
		if fl := (Flag{Path: path, Archived: r.IsArchived != nil && *r.IsArchived, Disabled: r.IsDisabled != nil && *r.IsDisabled}); fl.Archived || fl.Disabled {
			a.Flags = append(a.Flags, fl)
		}
		switch {
		case !strings.EqualFold(*r.NameWithOwner, path):
			a.Renamed = append(a.Renamed, Rename{From: path, To: *r.NameWithOwner, At: at})
		case !at.IsZero():
			a.Pushed = append(a.Pushed, Push{Path: path, At: at})
		}
	}
	return a, rl, nil
}

// aliasIndex reads "r<n>", n written without leading zeros.
func aliasIndex(k string) (int, bool) {
	if len(k) < 2 || len(k) > 6 || k[0] != 'r' || (len(k) > 2 && k[1] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range k[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
