package api

import (
	"net/http"
	"strings"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/forge"
)

// Coarse classes of failure that anonymous readers see instead of the
// error text: git's stderr tells open ports from closed ones and shows
// volunteers' file paths. The operator (with the API token) sees the text.
const (
	ErrClassUnreachable = "upstream unreachable"
	ErrClassNotFound    = "not found"
	ErrClassTimeout     = "timeout"
	ErrClassTooLarge    = "too large"
	ErrClassTooManyRefs = "too many refs"
	ErrClassBadObjects  = "bad objects"
	ErrClassEmpty       = "empty advertisement"
	ErrClassBlocked     = "blocked destination"
	ErrClassAuth        = "upstream refused access"
	ErrClassThrottled   = "upstream throttled"
	ErrClassInvalid     = "invalid URL"
	ErrClassInternal    = "mirror error"
	ErrClassDiskFull    = "disk full"
	ErrClassOther       = "failed"
	ErrClassCancelled   = "cancelled"
	ErrClassLegal       = "unavailable for legal reasons"
	// A volunteer's pull refused: it served tips the upstream never had
	// (counted against it), or refs the upstream does not show (a source
	// that was behind; not counted).
	ErrClassForged   = "forged refs"
	ErrClassMismatch = "refs differ from the upstream"
)

// errorClasses maps what an error text says (in lower case) to its class,
// first match wins. The git classes are those of gitcmd.Error's text
// ("git fetch ...: <class>: ...").
var errorClasses = []struct {
	class string
	marks []string
}{
	{ErrClassCancelled, []string{cancelledText}},
	{ErrClassForged, []string{"forged"}},
	{ErrClassMismatch, []string{"differ from the upstream"}},
	{ErrClassBlocked, []string{"blocked destination"}},
	{ErrClassTooManyRefs, []string{"too many refs", "too-many-refs"}},
	{ErrClassTooLarge, []string{"too large", "too-large", "larger than", "out of memory"}},
	{ErrClassBadObjects, []string{"bad objects"}},
	{ErrClassEmpty, []string{"empty-advertisement", "empty advertisement"}},
	{ErrClassInvalid, []string{"invalid repository url"}},
	{ErrClassLegal, []string{": legal:", "error: 451", "unavailable for legal reasons"}},
	{ErrClassTimeout, []string{": timeout:", "timed out", "timeout", "deadline exceeded", "no result after"}},
	{ErrClassNotFound, []string{": not-found:", "not found", "does not exist", "not mirrored"}},
	{ErrClassAuth, []string{": auth:", "authentication", "permission denied", "error: 403"}},
	{ErrClassThrottled, []string{": throttled:", "rate limit", "error: 429"}},
	{ErrClassUnreachable, []string{": network:", ": tls:", "connection refused", "could not resolve", "unreachable",
		"connection reset", "no route to host", "unable to access", "could not connect", "failed to connect"}},
	{ErrClassDiskFull, []string{"disk full"}},
	{ErrClassInternal, []string{": disk:", "no space left", "could not pull", "cannot start the check"}},
}

// PublicError is the class of an error text that anyone may see; "" stays
// "".
func PublicError(msg string) string {
	if msg == "" {
		return ""
	}
	low := strings.ToLower(msg)
	for _, c := range errorClasses {
		for _, m := range c.marks {
			if strings.Contains(low, m) {
				return c.class
			}
		}
	}
	return ErrClassOther
}

// operator tells whether r carries the API token: such readers see error
// details. It answers nothing itself (reads are public).
func (s *Server) operator(r *http.Request) bool {
	scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return s.cfg.Token != "" && strings.EqualFold(scheme, "Bearer") && forge.EqualSecret(strings.TrimSpace(got), s.cfg.Token)
}

// PublicCatalogURL is where the catalog comes from as anonymous readers
// see it: a network URL (its credentials redacted already), or "" for a
// path on the coordinator's machine (file:// too), which is the operator's
// as the paths in error texts are.
func PublicCatalogURL(u string) string {
	if scheme, _, _ := strings.Cut(u, "://"); !catalog.IsURL(u) || strings.EqualFold(scheme, "file") {
		return ""
	}
	return u
}

// publicRepo hides the error details of repo from anonymous readers.
func publicRepo(repo *Repo) { repo.LastError = PublicError(repo.LastError) }

// publicDetail hides the error details of d from anonymous readers.
func publicDetail(d *RepoDetail) {
	publicRepo(&d.Repo)
	h := make([]HistoryEntry, len(d.History))
	for i, e := range d.History {
		e.Error = PublicError(e.Error)
		h[i] = e
	}
	d.History = h
}

// publicTask hides the error details of t from anonymous readers.
func publicTask(t Task) Task {
	t.Error = PublicError(t.Error)
	return t
}

// detail is the text of err, a failure to reach the coordinator, for the
// operator; anyone else is told only that.
func (s *Server) detail(r *http.Request, err error) string {
	if s.operator(r) {
		return err.Error()
	}
	return "the coordinator is out of reach (details with the API token)"
}
