// Package forge knows the forges that gitfleet mirrors from (GitHub,
// GitLab, Gitea/Forgejo, Gitee) and asks their APIs when repositories were
// last pushed, and, in the same answers, their default branch and whether
// they are archived or disabled.
//
// It owns the one table of forge kinds (kinds, below): for each, the
// well-known hosts and their API bases, the API base of a self-hosted
// one, the constructor of its feed client, its pace and whether it needs
// a token, and its webhooks (Webhook): how a delivery is recognised
// (event header and events), authenticated (Auth: HMAC of the body, a
// plain token, or Gitee's signed timestamp), identified for replay
// protection (DeliveryID, OneTimeCredential) and read (Parse: repository
// URLs, ref, push time). Callers look a kind up and use what its row
// says; nothing outside the table tests a kind's name.
//
// To add a forge: add its row here, its client (github.go and rest.go
// hold the others') and its test. TestEveryRowOfTheTableIsComplete checks
// that the row is whole and that the real payloads of its webhooks, when
// the shared test data has them, parse. What other packages do per forge
// follows from the table: the API's route for its webhooks, the setting
// of its webhook secret and the help that names kinds and hosts (package
// config); docs' TestNoListOfForgesOutsideTheTable keeps it so. One thing
// the row cannot say: if the forge's public host treats repository paths
// without regard to case, repokey's foldedByDefault must name it too
// (repokey sits below this package).
//
// It parses the operator's configuration (--forge, --forge-token,
// GITFLEET_FORGE_TOKENS) and keeps tokens out of logs and error texts.
//
// Every client also lists an owner's repositories (OwnerLister: GitHub's
// GraphQL repositoryOwner.repositories, GitLab's group projects with or
// without subgroups, Gitea's and Gitee's organisation repositories), page
// by page within a bound, all or nothing, for the catalog's lister lines.
//
// A client asks one forge host, within its rate limits: it remembers when
// each token may be used again and how long to back off after errors, and
// says so through Ready and WaitError instead of sleeping. A forge's answer
// is untrusted input: bounded in size, decoded strictly, and only reported
// (Answer): a repository missing from an answer is not a change, and a
// renamed or deleted one is reported, never acted on. A name the forge
// gives that is not a repository name (ValidName) or a branch name git
// could not store (ValidBranch), or that carries one of
// the client's tokens or another credential, is left out and counted
// (Answer.Refused); errors that quote an answer have the tokens replaced. A webhook's payload
// is untrusted too: Parse only reads it, the caller validates what it
// names. Deciding what to check, and when to ask, is the caller's job;
// this package does no scheduling and keeps no state beyond its clients'
// limits.
package forge

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Kind is the software a forge runs, which decides its API.
type Kind string

// The kinds of forge that have a feed client.
const (
	GitHub Kind = "github" // GitHub and GitHub Enterprise Server: GraphQL
	GitLab Kind = "gitlab" // GitLab v4 REST
	Gitea  Kind = "gitea"  // Gitea and Forgejo (Codeberg) v1 REST
	Gitee  Kind = "gitee"  // Gitee v5 REST
)

// kindInfo is one row of the table of kinds.
type kindInfo struct {
	kind Kind
	// wellKnown maps the kind's public hosts to their API bases; they are
	// configured by default.
	wellKnown map[string]string
	// selfHosted is the API base of another host of this kind (nil when
	// the kind is not self-hosted: the operator must give api=).
	selfHosted func(host string) string
	// webhook is nil when the full node does not take this kind's hooks.
	webhook *Webhook
	// newClient makes the feed client of a forge of this kind.
	newClient func(f Forge, t *transport) Client
	// batchPerRequest: one request of the kind's Lookup asks for a whole
	// batch (GitHub's GraphQL); otherwise each path costs a request.
	batchPerRequest bool
	// needsToken, when set, is why New refuses a forge of this kind
	// without a token, and tokenHint which token will do.
	needsToken, tokenHint string
	// pace is the default least time between two requests.
	pace time.Duration
	// lag: the kind's time may be this much older than the last push.
	lag time.Duration
	// subgroups: the kind's groups have subgroups, which a listing may
	// include (GitLab).
	subgroups bool
}

// kinds is the table of forge kinds, read-only. An API base is where the
// kind's endpoints hang: GitHub's GraphQL endpoint is base+"/graphql"
// (https://api.github.com/graphql; GitHub Enterprise Server's is
// https://HOST/api/graphql, its REST API being at https://HOST/api/v3).
var kinds = []kindInfo{
	{
		kind:       GitHub,
		wellKnown:  map[string]string{"github.com": "https://api.github.com"},
		selfHosted: func(host string) string { return "https://" + host + "/api" },
		webhook: &Webhook{
			Name: "GitHub", SecretName: "secret",
			EventHeader: "X-GitHub-Event", RefEvents: []string{"push", "create", "delete"}, PingEvent: "ping",
			TokenHeader: "X-Hub-Signature-256", Auth: AuthHMACBody, AutoAdd: true,
			DeliveryHeaders: []string{"X-GitHub-Delivery"},
		},
		newClient:       newGitHub,
		batchPerRequest: true,
		needsToken:      "GitHub's GraphQL API needs a token",
		tokenHint:       "a fine-grained token with no permissions will do",
	},
	{
		kind:       GitLab,
		wellKnown:  map[string]string{"gitlab.com": "https://gitlab.com/api/v4"},
		selfHosted: func(host string) string { return "https://" + host + "/api/v4" },
		webhook: &Webhook{
			Name: "GitLab", SecretName: "secret token",
			EventHeader: "X-Gitlab-Event", RefEvents: []string{"Push Hook", "Tag Push Hook"},
			TokenHeader: "X-Gitlab-Token", Auth: AuthPlainToken, AutoAdd: true,
			// A retry repeats Idempotency-Key; older GitLab sends only the UUID.
			DeliveryHeaders:  []string{"Idempotency-Key", "X-Gitlab-Event-UUID"},
			ProjectNamesRepo: true, HomepageNamesRepo: true,
		},
		newClient: newGitLab,
		pace:      250 * time.Millisecond,
		// GitLab updates last_activity_at at most once an hour
		// (gitlab-org/gitlab-foss!6391).
		lag:       time.Hour,
		subgroups: true,
	},
	{
		kind:       Gitea,
		wellKnown:  map[string]string{"codeberg.org": "https://codeberg.org/api/v1"},
		selfHosted: func(host string) string { return "https://" + host + "/api/v1" },
		newClient:  newGitea,
		pace:       250 * time.Millisecond,
	},
	{
		kind:      Gitee,
		wellKnown: map[string]string{"gitee.com": "https://gitee.com/api/v5"},
		webhook: &Webhook{
			Name: "Gitee", SecretName: "password or signing key",
			EventHeader: "X-Gitee-Event", RefEvents: []string{"Push Hook", "Tag Push Hook"},
			TokenHeader: "X-Gitee-Token", TimestampHeader: "X-Gitee-Timestamp", Auth: AuthGiteeToken,
			ProjectNamesRepo: true,
		},
		newClient: newGitee,
		pace:      750 * time.Millisecond,
	},
}

func lookupKind(k Kind) (*kindInfo, bool) {
	for i := range kinds {
		if kinds[i].kind == k {
			return &kinds[i], true
		}
	}
	return nil, false
}

// Kinds lists the kinds of forge, in the table's order.
func Kinds() []Kind {
	out := make([]Kind, len(kinds))
	for i, k := range kinds {
		out[i] = k.kind
	}
	return out
}

// WebhookOf returns how deliveries of kind k look, or nil when the full
// node takes no webhooks of that kind.
func WebhookOf(k Kind) *Webhook {
	if ki, ok := lookupKind(k); ok {
		return ki.webhook
	}
	return nil
}

// ActivityLag is how much older than the last push a time given by a
// forge of kind k may be: GitLab's last_activity_at moves at most once an
// hour, so a push within the hour after other activity leaves it as it
// was. A caller takes a time t as "nothing new since v" only when
// t+ActivityLag(k) is before v; otherwise it checks the repository.
func ActivityLag(k Kind) time.Duration {
	if ki, ok := lookupKind(k); ok {
		return ki.lag
	}
	return 0
}

// HasSubgroups tells whether a forge of kind k has groups within groups,
// which a listing of a group may include ("/**").
func HasSubgroups(k Kind) bool {
	ki, ok := lookupKind(k)
	return ok && ki.subgroups
}

// PathsPerRequest is how many repositories one request of a Lookup of
// kind k asks for, given its BatchSize: the whole batch where one request
// answers for a batch (GitHub's GraphQL), else one.
func PathsPerRequest(k Kind, batch int) int {
	if ki, ok := lookupKind(k); ok && ki.batchPerRequest {
		return batch
	}
	return 1
}

// Forge is one forge host that the operator configured.
type Forge struct {
	// Host is the host as it appears in repository keys, with its port
	// when not the default: "github.com", "git.example.org:8443".
	Host string
	Kind Kind
	// API is the API base (see the table of kinds).
	API *url.URL
}

func (f Forge) String() string { return fmt.Sprintf("%s=%s,api=%s", f.Host, f.Kind, f.API) }

// Push is when a repository was last pushed, as a forge says. For
// listings (Lister) it is the last activity, which a push updates and
// other events (issues, settings) may too.
type Push struct {
	Path string // "owner/name", or GitLab's "group/subgroup/name"
	At   time.Time
}

// Rename is an asked repository that the forge answers under another
// name (a rename or a transfer).
type Rename struct {
	From, To string
	At       time.Time // its last push (zero: never pushed)
}

// Answer is what a forge said. Repositories that it does not mention
// (not answered, an error about one repository, a repository never
// pushed) are unknown: not a change.
type Answer struct {
	Pushed []Push
	// Missing are asked repositories that the forge says do not exist:
	// deleted, or private to this token.
	Missing []string
	Renamed []Rename
	// Truncated: a listing stopped at its bound of pages before reaching
	// the asked time, so repositories changed in the gap are unknown.
	Truncated bool
	// Forks are asked repositories that the forge says are forks, with
	// their parent as the forge names it (a valid name, whose keys
	// Parents checks).
	Forks []Fork
	// Heads are asked repositories with the branch the forge names as
	// their default (GitHub's defaultBranchRef, the REST forges'
	// default_branch), a name git could store (ValidBranch).
	Heads []Head
	// Flags are asked repositories the forge marks archived or disabled.
	Flags []Flag
	// IDs are asked repositories with the forge's stable number for them
	// (GitHub's databaseId, GitLab's project id, Gitea's and Gitee's id),
	// which a rename keeps and a repository made anew under the old name
	// does not.
	IDs []RepoID
	// Refused counts the repositories the forge answered with a name
	// that is not a repository name (ValidName), or that carries one of
	// the client's tokens or another credential: left out of the answer,
	// for the caller to report, never to show.
	Refused int
}

// Head is an asked repository (Path, as asked) whose default branch the
// forge names Branch (without refs/heads/).
type Head struct {
	Path, Branch string
}

// RepoID is an asked repository (Path, as asked) and the forge's stable
// number for it (positive).
type RepoID struct {
	Path string
	ID   int64
}

// Flag is an asked repository (Path, as asked) that the forge marks
// archived (read-only, kept) or disabled (the forge refuses it to
// everyone: a policy or billing block).
type Flag struct {
	Path               string
	Archived, Disabled bool
}

// ValidBranch tells whether name is a branch name git could store
// (git check-ref-format's rules) of at most 255 bytes: a forge's word is
// not trusted to be one.
func ValidBranch(name string) bool {
	if name == "" || len(name) > 255 || name[0] == '-' || name[0] == '/' || name[0] == '.' ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") ||
		strings.Contains(name, "..") || strings.Contains(name, "//") || strings.Contains(name, "@{") ||
		strings.Contains(name, "/.") || name == "@" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= 0x20 || c == 0x7f || strings.IndexByte("~^:?*[\\", c) >= 0 {
			return false
		}
	}
	return true
}

// Fork is an asked repository (Path, as asked) that is a fork of Parent,
// a path on the same forge.
type Fork struct {
	Path, Parent string
}

// Client asks one forge host. Its methods may be called from several
// goroutines.
type Client interface {
	// Ready returns the earliest time at which the client may make a
	// request: now or earlier when it may at once, later while every
	// token's limit is spent or while it backs off after errors.
	Ready(now time.Time) time.Time
	// Budgets returns what each token has left of its rate limit, as the
	// forge last said.
	Budgets() []TokenBudget
	// PollInterval is the least time between two polls that the forge
	// asked for (X-Poll-Interval), 0 when it did not.
	PollInterval() time.Duration
}

// TokenBudget is what one token has left of its rate limit.
type TokenBudget struct {
	Name string // "token 1 of 2", never the token
	// Remaining is the requests (GitHub's GraphQL: points) left until
	// Reset, -1 while the forge has not said.
	Remaining int
	Limit     int // the limit's size, 0 when not said
	Reset     time.Time
	// RestsUntil is when a token set aside (a spent limit, a refusal)
	// may be used again; zero or past when it may now.
	RestsUntil time.Time
}

// Lookup is a client that answers for given repositories. Every client
// of this package is one.
type Lookup interface {
	Client
	// BatchSize is the most paths one PushedAt takes.
	BatchSize() int
	// Askable says whether PushedAt can ask about path: a path the
	// forge's API cannot name (GitHub's and Gitea's are owner/name) is
	// never asked, so no answer can ever cover it.
	Askable(path string) bool
	// PushedAt asks when each repository ("owner/name") was last pushed.
	// Paths that the forge cannot name are not asked. On error the
	// answer is empty: nothing is learnt from a failed request.
	PushedAt(ctx context.Context, paths []string) (Answer, error)
}

// ByID is a Lookup that also asks about a repository by the forge's
// stable number (GitLab's GET /projects/:id, Gitea's GET
// /repositories/:id): where a repository went when its old path answers
// 404 or names another repository.
type ByID interface {
	// PushedAtByID asks about the repository numbered id, known to the
	// caller as path; its answer names path (a rename From path). False
	// when the forge cannot ask by number.
	PushedAtByID(ctx context.Context, path string, id int64) (a Answer, asked bool, err error)
}

// Lister is a client that lists what changed, for forges whose API lists
// repositories by activity (GitLab, Gitea). A listing names every
// repository of the host, mirrored or not: the caller keeps those it
// knows.
type Lister interface {
	Client
	// ChangedSince lists the repositories active since since, within a
	// bound of pages (Answer.Truncated when it was reached). On error the
	// answer is empty.
	ChangedSince(ctx context.Context, since time.Time) (Answer, error)
}

// New returns the feed client of forge f, asking with tokens in turn
// (none: anonymously, where the forge allows it). The client is a Lookup
// and an OwnerLister and, for GitLab and Gitea, also a Lister.
func New(f Forge, tokens []Token, opt Options) (Client, error) {
	ki, ok := lookupKind(f.Kind)
	if !ok {
		return nil, fmt.Errorf("forge %s: unknown kind %q (want one of %v)", f.Host, f.Kind, Kinds())
	}
	if f.API == nil {
		return nil, fmt.Errorf("forge %s: no API base", f.Host)
	}
	if ki.needsToken != "" && len(tokens) == 0 {
		return nil, fmt.Errorf("forge %s: %s: give --forge-token %s=TOKEN (%s)", f.Host, ki.needsToken, f.Host, ki.tokenHint)
	}
	return ki.newClient(f, newTransport(f, tokens, opt)), nil
}

// Parents turns the forks of an answer about host into parent keys by
// repository key, in repokey's canonical form under fold as PushTimes'.
// The forge names a parent on its own host, so a parent is host + "/" +
// the name it gave; a name that is not a path of the forge, or that
// cannot be a key, or a repository named as its own parent, is left out
// and counted in refused. Whether a parent is a key of the fleet, or
// makes a cycle, is for the caller to check.
func Parents(fold repokey.Folding, host string, a Answer) (parents map[string]string, refused int) {
	parents = make(map[string]string, len(a.Forks))
	for _, f := range a.Forks {
		key, err := fold.Canonical(host + "/" + f.Path)
		if err != nil {
			refused++
			continue
		}
		if !validPath(f.Parent, 0) {
			refused++
			continue
		}
		parent, err := fold.Canonical(host + "/" + f.Parent)
		if err != nil || parent == key || parent.Host() != key.Host() {
			refused++
			continue
		}
		parents[key.String()] = parent.String()
	}
	return parents, refused
}

// Flags turns an answer about host into the flags the forge set, by
// repository key, as PushTimes keys push times (paths that are no keys
// are left out).
func Flags(fold repokey.Folding, host string, a Answer) map[string]Flag {
	flags := make(map[string]Flag, len(a.Flags))
	for _, fl := range a.Flags {
		if key, err := fold.Canonical(host + "/" + fl.Path); err == nil {
			flags[key.String()] = fl
		}
	}
	return flags
}

// IDs turns an answer about host into the forge's repository numbers by
// key, as PushTimes keys push times (paths that are no keys are left out).
func IDs(fold repokey.Folding, host string, a Answer) map[string]int64 {
	ids := make(map[string]int64, len(a.IDs))
	for _, r := range a.IDs {
		if key, err := fold.Canonical(host + "/" + r.Path); err == nil {
			ids[key.String()] = r.ID
		}
	}
	return ids
}

// Heads turns an answer about host into default branches (as
// refs/heads/<branch>) by repository key, as PushTimes keys push times.
func Heads(fold repokey.Folding, host string, a Answer) (heads map[string]string, refused int) {
	heads = make(map[string]string, len(a.Heads))
	for _, h := range a.Heads {
		key, err := fold.Canonical(host + "/" + h.Path)
		if err != nil {
			refused++
			continue
		}
		heads[key.String()] = "refs/heads/" + h.Branch
	}
	return heads, refused
}

// PushTimes turns an answer about host into push times by repository
// key (host + "/" + path, in repokey's canonical form under fold, so that
// a forge's spelling of a path on a host that folds case finds the key). Paths that cannot be keys are left
// out and counted in refused. Renamed and missing repositories are not
// included: they are for the caller to report.
func PushTimes(fold repokey.Folding, host string, a Answer) (times map[string]time.Time, refused int) {
	times = make(map[string]time.Time, len(a.Pushed))
	for _, p := range a.Pushed {
		key, err := fold.Canonical(host + "/" + p.Path)
		if err != nil {
			refused++
			continue
		}
		if t, ok := times[key.String()]; !ok || p.At.After(t) {
			times[key.String()] = p.At
		}
	}
	return times, refused
}
