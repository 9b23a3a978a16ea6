package mirror

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// UpstreamHas asks url for the object oid by its ID and reports whether the
// upstream holds it, reachable from its refs or not: a commit that the
// upstream took back (a force-push to an older value) is still there, and
// protocol v2 serves it by ID. The object comes into a quarantine that
// borrows key's objects and is deleted: nothing reaches the mirror. An
// upstream that refuses the object (it lacks it, or like gitfleet's own
// serving, it serves only what its refs reach) gives false and no error;
// one that cannot be asked, an error (the caller cannot tell).
func (s *Store) UpstreamHas(ctx context.Context, key repokey.Key, url, oid string) (bool, error) {
	if !gitcmd.IsOID(oid) {
		return false, fmt.Errorf("mirror %s: %q is not an object ID", key, oid)
	}
	unlock := s.Lock(key)
	defer unlock()
	q, err := s.quarantine(ctx, key, s.Path(key), !s.Has(key), "")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(q)
	// Only the object and what it needs at depth 1, without blobs where
	// the upstream can filter: the answer is all that is wanted, and an
	// upstream cannot make this fetch a whole history.
	err = s.git.Run(ctx, gitcmd.Cmd{GitDir: q, Name: "fetch", Config: FsckConfig(),
		Flags: []string{"--no-write-fetch-head", "--no-tags", "--quiet", "--no-auto-gc", "--depth=1", "--filter=blob:none"},
		Args:  []string{url, oid}})
	if err != nil {
		// git upload-pack says "not our ref"; a server that serves only
		// what its refs reach (gitfleet's own) answers 403 to any other want.
		if msg := err.Error(); strings.Contains(msg, "not our ref") || strings.Contains(msg, "error: 403") {
			return false, nil
		}
		return false, fmt.Errorf("mirror %s: ask the upstream for %s: %w", key, oid, err)
	}
	return true, nil
}
