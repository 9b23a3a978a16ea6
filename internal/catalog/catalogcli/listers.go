package catalogcli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/forge"
)

// listerFlags are the flags that say how lister lines are checked and
// expanded: the forges and tokens, as the coordinator takes them.
type listerFlags struct {
	expand bool
	forges stringList
	tokens stringList
}

func (lf *listerFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&lf.expand, "expand-listers", false, "list the repositories of every lister line (https://github.com/ORG/*) through its forge's API, as the coordinator does")
	fs.Var(&lf.forges, "forge", "a forge host and its kind, HOST=KIND[,api=URL], as the coordinator's --forge (repeatable)")
	fs.Var(&lf.tokens, "forge-token", "HOST=TOKEN, as the coordinator's --forge-token (repeatable; also "+forge.TokensEnv+")")
}

// config is the forges the flags name, with the well-known ones.
func (lf *listerFlags) config() (forge.Config, error) {
	cfg, err := forge.Parse(lf.forges, lf.tokens, os.Getenv(forge.TokensEnv))
	if err != nil {
		return forge.Config{}, usageError{fmt.Errorf("--forge or --forge-token: %w", err)}
	}
	return cfg, nil
}

// listerProblems are the problems of lister lines that no configured
// forge can list: a host of no known kind, subgroups on a forge that has
// none.
func listerProblems(ls []catalog.Lister, cfg forge.Config) []catalog.Problem {
	var out []catalog.Problem
	for _, l := range ls {
		f, ok := cfg.Forges[l.Host]
		reason := ""
		switch {
		case !ok:
			reason = fmt.Sprintf("lister %s: %s is no forge of a known kind, so it cannot be listed: give --forge %s=KIND (one of %v)", l.Pattern, l.Host, l.Host, forge.Kinds())
		case l.Subgroups && !forge.HasSubgroups(f.Kind):
			reason = fmt.Sprintf("lister %s: /** lists a group's subgroups, which %s (%s) has not: use /*", l.Pattern, l.Host, f.Kind)
		}
		if reason != "" {
			out = append(out, catalog.Problem{File: l.File, Line: l.Line, Reason: reason, Severity: catalog.SeverityError})
		}
	}
	return out
}

// expand lists every lister of ls that a forge of cfg can list, and
// returns the listings by pattern, and a problem for each that failed.
func expand(ctx context.Context, ls []catalog.Lister, cfg forge.Config, progress io.Writer) (map[string][]catalog.Listed, []catalog.Problem) {
	listings := make(map[string][]catalog.Listed)
	var problems []catalog.Problem
	clients := make(map[string]forge.OwnerLister)
	for _, l := range ls {
		if _, done := listings[l.Pattern]; done {
			continue
		}
		f, ok := cfg.Forges[l.Host]
		if !ok {
			continue // listerProblems says why
		}
		ol, ok := clients[l.Host]
		if !ok {
			cl, err := forge.New(f, cfg.Tokens[l.Host], forge.Options{UserAgent: "gitfleet-catalog"})
			if err != nil {
				problems = append(problems, catalog.Problem{File: l.File, Line: l.Line, Severity: catalog.SeverityError,
					Reason: fmt.Sprintf("lister %s: %v", l.Pattern, err)})
				continue
			}
			ol, _ = cl.(forge.OwnerLister)
			clients[l.Host] = ol
		}
		ans, err := ol.ListOwner(ctx, forge.OwnerQuery{Owner: l.Owner, Subgroups: l.Subgroups})
		if err != nil {
			problems = append(problems, catalog.Problem{File: l.File, Line: l.Line, Severity: catalog.SeverityError,
				Reason: fmt.Sprintf("lister %s: the listing failed: %v", l.Pattern, err)})
			continue
		}
		repos := make([]catalog.Listed, len(ans.Repos))
		for i, r := range ans.Repos {
			repos[i] = catalog.Listed{Name: r.Path, ID: r.ID, Fork: r.Fork, Archived: r.Archived, Size: r.Size, Topics: r.Topics}
		}
		listings[l.Pattern] = repos
		refused := ""
		if ans.Refused > 0 {
			refused = fmt.Sprintf(", %d %s not below its owner refused", ans.Refused, map[bool]string{true: "name", false: "names"}[ans.Refused == 1])
		}
		fmt.Fprintf(progress, "%s:%d: lister %s: %d repositories in %d requests%s\n", l.File, l.Line, l.Pattern, len(repos), ans.Requests, refused)
	}
	return listings, problems
}
