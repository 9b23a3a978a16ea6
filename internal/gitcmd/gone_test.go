package gitcmd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repostate"
)

// A git server on 127.0.0.1 that answers git's smart HTTP with a status
// is classified by that status, as git reports it: 404 and 410 are
// deleted, 451 legal; a server's body (git shows it as "remote: ...")
// never changes the verdict, whatever it claims.
func TestAGoneServerIsClassifiedByItsStatusNotItsWords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   Class
		public repostate.Class
	}{
		{"404", http.StatusNotFound, "Repository not found.", ClassDeleted, repostate.ClassNotFound},
		{"410", http.StatusGone, "gone", ClassDeleted, repostate.ClassNotFound},
		{"451", http.StatusUnavailableForLegalReasons, "Repository access blocked", ClassLegal, repostate.ClassLegal},
		{"a 404 that says 451", http.StatusNotFound, "The requested URL returned error: 451, unavailable for legal reasons", ClassDeleted, repostate.ClassNotFound},
		{"a 500 that says 404", http.StatusInternalServerError, "The requested URL returned error: 404\nfatal: repository 'x' not found", ClassNetwork, repostate.ClassUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, tc.body, tc.status)
			}))
			defer srv.Close()
			_, err := New(Direct(), Options{}).ListRefs(context.Background(), srv.URL+"/a/b.git", RefLimits{})
			if err == nil {
				t.Fatal("listing a gone repository succeeded")
			}
			if got := ClassOf(err); got != tc.want || got.Public() != tc.public {
				t.Fatalf("class %s (public %q), want %s (%q): %v", got, got.Public(), tc.want, tc.public, err)
			}
		})
	}
}

// A git server that redirects the repository elsewhere (a rename) fails
// git's listing, which follows no redirect, and Redirected says so; a
// server's words about a redirect ("remote: ...", a 404's body) do not.
func TestAMovedRepositorysRedirectIsToldFromItsWords(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   bool
	}{
		{http.StatusMovedPermanently, "", true},
		{http.StatusFound, "", true},
		{http.StatusTemporaryRedirect, "", true},
		{http.StatusPermanentRedirect, "", true},
		{http.StatusNotFound, "The requested URL returned error: 301", false},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status/100 == 3 {
					w.Header().Set("Location", "/new/name.git/info/refs?service=git-upload-pack")
				}
				http.Error(w, tc.body, tc.status)
			}))
			defer srv.Close()
			_, err := New(Direct(), Options{}).ListRefs(context.Background(), srv.URL+"/a/b.git", RefLimits{})
			if err == nil {
				t.Fatal("listing a moved repository succeeded")
			}
			if got := Redirected(err); got != tc.want {
				t.Fatalf("Redirected = %v, want %v: %v", got, tc.want, err)
			}
		})
	}
}
