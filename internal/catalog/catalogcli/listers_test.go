package catalogcli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// orgAPI answers GitHub's GraphQL listing of an owner's repositories,
// all on one page: forks are the odd ones.
func orgAPI(t *testing.T, repos ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "bearer tok" {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		var nodes []any
		for i, name := range repos {
			nodes = append(nodes, map[string]any{"nameWithOwner": name, "databaseId": i + 1, "isFork": i%2 == 1, "isArchived": false, "diskUsage": 1,
				"repositoryTopics": map[string]any{"nodes": []any{}}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{
			"rateLimit":       map[string]any{"cost": 1, "remaining": 4999, "limit": 5000, "resetAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
			"repositoryOwner": map[string]any{"repositories": map[string]any{"pageInfo": map[string]any{"hasNextPage": false, "endCursor": nil}, "nodes": nodes}}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestCheckShowsListersAndExpandsThemWhenAsked(t *testing.T) {
	dir, _ := repo(t, map[string]string{
		"orgs.list": "https://github.com/a/1\nhttps://github.com/acme/* forks: false\nhttps://git.unknown-forge.org/team/*\nhttps://github.com/acme/***\n",
	})
	code, out, _ := run("check", dir)
	for _, want := range []string{
		"orgs.list:2: lister https://github.com/acme/* (not expanded",
		"orgs.list:3: error: lister https://git.unknown-forge.org/team/*: git.unknown-forge.org is no forge of a known kind",
		`orgs.list:4: error: lister "https://github.com/acme/***": a "*" may only end the path`,
		"1 entry, 2 listers, 2 errors",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check says no %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}

	api := orgAPI(t, "acme/one", "acme/fork", "acme/two", "other/x")
	t.Setenv("GITFLEET_FORGE_TOKENS", "")
	code, out, errOut := run("check", dir, "--expand-listers", "--forge", "github.com=github,api="+api, "--forge-token", "github.com=tok")
	for _, want := range []string{
		"orgs.list:2: lister https://github.com/acme/*: 3 repositories in 1 requests, 1 name not below its owner refused",
		"3 entries, 2 listers, 2 errors",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check --expand-listers says no %q:\n%s%s", want, out, errOut)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}

func TestDiffShowsListerLinesAndWithExpansionTheirKeys(t *testing.T) {
	dir, ids := repo(t,
		map[string]string{"orgs.list": "https://github.com/acme/*\n"},
		map[string]string{"orgs.list": "https://github.com/acme/* forks: false\nhttps://github.com/a/1\n"})
	code, out, _ := run("diff", dir, ids[0], ids[1])
	for _, want := range []string{"+ lister https://github.com/acme/* (orgs.list:1)", "- lister https://github.com/acme/* (orgs.list:1)", "+ github.com/a/1\n", "1 added, 0 removed"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("diff (exit %d) says no %q:\n%s", code, want, out)
		}
	}
	api := orgAPI(t, "acme/one", "acme/fork", "acme/two")
	code, out, errOut := run("diff", dir, ids[0], ids[1], "--expand-listers", "--forge", "github.com=github,api="+api, "--forge-token", "github.com=tok")
	for _, want := range []string{"- github.com/acme/fork\n", "+ github.com/a/1\n", "1 added, 1 removed, 0 changed"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("diff --expand-listers (exit %d) says no %q:\n%s%s", code, want, out, errOut)
		}
	}
}
