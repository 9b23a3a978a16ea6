package repokey

import (
	"fmt"
	"net/url"
	"strings"
)

// RefsPath is what git's smart HTTP asks of a repository URL first (with
// ?service=git-upload-pack): the request an upstream answers with a
// redirect when the repository moved.
const RefsPath = "/info/refs"

// Redirect reads where an upstream's git server sent the first request of
// a fetch of fetchURL (fetchURL + RefsPath + "?service=git-upload-pack")
// when it answered with a redirect to location: the new repository's key
// and URL. The location is hostile input, read as git would follow it and
// then refused unless it names a repository the way a catalog line may
// (Normalize, with opt: no credentials, no query beyond git's own, no
// percent-escapes, the egress policy's hosts): a relative location is
// resolved against the request; the target must keep git's request (a path
// ending in RefsPath, as git itself requires of a redirect); a path with
// "." or ".." segments, a scheme other than the request's (https to http
// is a downgrade) and a redirect to the same key are refused. sameHost
// says whether the key is on the request's host (with its port): a key on
// another host is for showing, never for following.
func Redirect(from Key, fetchURL, location string, opt Options) (to Key, toURL string, sameHost bool, err error) {
	fail := func(format string, a ...any) (Key, string, bool, error) {
		return "", "", false, fmt.Errorf("%w: %s redirected to %q: %s", ErrInvalid, from, truncate(Redact(location)), fmt.Sprintf(format, a...))
	}
	if location == "" {
		return fail("no Location")
	}
	for _, r := range location {
		if r < 0x21 || r == 0x7f {
			return fail("a space or control character")
		}
	}
	base, err := url.Parse(strings.TrimSuffix(fetchURL, "/") + RefsPath + "?service=git-upload-pack")
	if err != nil {
		return fail("the request's URL: %v", err)
	}
	loc, err := url.Parse(location)
	if err != nil {
		return fail("cannot parse: %v", err)
	}
	if loc.User != nil {
		return fail("credentials in the URL are not allowed")
	}
	// ResolveReference drops dot segments: they are refused before, as
	// a path that climbs is no name a server gives a repository.
	for _, seg := range strings.Split(loc.EscapedPath(), "/") {
		if seg == "." || seg == ".." {
			return fail("'.' or '..' segment")
		}
	}
	u := base.ResolveReference(loc)
	if !strings.EqualFold(u.Scheme, base.Scheme) {
		return fail("scheme %q, not the request's %q", u.Scheme, base.Scheme)
	}
	if u.Fragment != "" || (u.RawQuery != "" && u.RawQuery != "service=git-upload-pack") {
		return fail("a query or fragment other than git's")
	}
	if !strings.HasSuffix(u.EscapedPath(), RefsPath) {
		return fail("the target is not git's %s (git follows no other)", RefsPath)
	}
	u.Path = strings.TrimSuffix(u.EscapedPath(), RefsPath)
	u.RawPath, u.RawQuery = "", ""
	to, toURL, err = Normalize(u.String(), opt)
	if err != nil {
		return "", "", false, fmt.Errorf("%s redirected: %w", from, err)
	}
	if to == from {
		return fail("to itself")
	}
	return to, toURL, to.Host() == from.Host(), nil
}
