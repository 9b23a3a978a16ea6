package gitcmd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// What git says on its stderr, classified as Run classifies it, and the
// class the public sees of it.
func TestGitFailuresMapToTheirPublicClass(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   repostate.Class
	}{
		{"fatal: unable to access 'http://127.0.0.1:6379/x/': Failed to connect to 127.0.0.1 port 6379: Connection refused", repostate.ClassUnreachable},
		{"fatal: unable to access 'https://h/x/': SSL certificate problem: self-signed certificate", repostate.ClassUnreachable},
		{"remote: Repository not found.\nfatal: repository 'https://h/x/' not found", repostate.ClassNotFound},
		{"fatal: unable to access 'https://h/x/': The requested URL returned error: 403", repostate.ClassAuth},
		{"fatal: could not read Username for 'https://h': terminal prompts disabled", repostate.ClassAuth},
		{"fatal: unable to access 'https://h/x/': The requested URL returned error: 429", repostate.ClassThrottled},
		{"fatal: unable to access 'https://h/x/': The requested URL returned error: 451", repostate.ClassLegal},
		{"fatal: unable to access 'https://h/x/': The requested URL returned error: 301", repostate.ClassBlocked},
		{"fatal: write error: No space left on device", repostate.ClassInternal},
		{"fatal: Out of memory, malloc failed (tried to allocate 1048576 bytes)", repostate.ClassTooLarge},
		{"error: object 1234: hasDotgit: contains '.git'\nfatal: fsck error in packed object", repostate.ClassBadObjects},
		{"something nobody foresaw", repostate.ClassOther},
	} {
		err := fmt.Errorf("mirror a/b: %w", &Error{Args: []string{"fetch"}, Stderr: tc.stderr, Class: classify(tc.stderr, errors.New("exit status 128"))})
		if got := ClassOf(err).Public(); got != tc.want {
			t.Errorf("%q: class %s, public %q; want %q", tc.stderr, ClassOf(err), got, tc.want)
		}
	}
	for _, tc := range []struct {
		err  error
		want repostate.Class
	}{
		{fmt.Errorf("ls-remote: %w", context.DeadlineExceeded), repostate.ClassTimeout},
		{&Error{Args: []string{"fetch"}, Class: ClassTimeout, Err: context.DeadlineExceeded}, repostate.ClassTimeout},
		{&Error{Args: []string{"ls-remote"}, Class: ClassTooManyRefs}, repostate.ClassTooManyRefs},
		{fmt.Errorf("dial: %w", &egress.BlockedError{Reason: "169.254.169.254 is link-local"}), repostate.ClassBlocked},
		{errors.New("not git at all"), repostate.ClassOther},
		{&Error{Class: Class("a class a previous version had")}, repostate.ClassOther},
	} {
		if got := ClassOf(tc.err).Public(); got != tc.want {
			t.Errorf("%v: public %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Every class git's failures have has a public class of its own choosing,
// not the fallback by omission.
func TestEveryGitClassIsMapped(t *testing.T) {
	for _, c := range []Class{ClassOther, ClassTimeout, ClassNetwork, ClassNotFound, ClassAuth, ClassTLS, ClassThrottled,
		ClassDisk, ClassLegal, ClassTooLarge, ClassTooManyRefs, ClassBadObjects, ClassBlocked} {
		if _, ok := publicClasses[c]; !ok {
			t.Errorf("git class %q has no public class", c)
		}
	}
}
