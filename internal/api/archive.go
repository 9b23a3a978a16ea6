package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// ArchiveReader lists the tips that force-pushes and deletions took away
// from a repository, kept under refs/archive/ when it archives them.
type ArchiveReader interface {
	// Archive lists key's archive refs, oldest first; an error wrapping
	// ErrNotFound says this full node holds no copy of key.
	Archive(ctx context.Context, key repokey.Key) ([]ArchivedRef, error)
}

// ArchivedRef is one kept tip.
type ArchivedRef struct {
	Name string    `json:"name"`             // refs/archive/<unix-time>/<ref>
	Ref  string    `json:"ref"`              // the ref whose tip it was
	OID  string    `json:"old_id,omitempty"` // the tip, fetchable by id (to the API token alone)
	At   time.Time `json:"time"`             // when the fetch took it away
}

// ArchivePage is the answer of GET /api/v1/repos/{key}/archive.
type ArchivePage struct {
	Key  string        `json:"key"`
	Refs []ArchivedRef `json:"refs"`
}

// isArchivePath splits GET /api/v1/repos/{key}/archive, as isLogPath does:
// a repository whose key ends in /archive is itself.
func (s *Server) isArchivePath(raw string) (string, bool) { return s.subPath(raw, "/archive") }

// repoArchive serves GET /api/v1/repos/{key}/archive.
func (s *Server) repoArchive(w http.ResponseWriter, r *http.Request, raw string) {
	if s.fleet.Archive == nil {
		writeError(w, http.StatusNotImplemented, "this server keeps no archive")
		return
	}
	key, ok := s.mirroredKey(w, raw)
	if !ok {
		return
	}
	refs, err := s.fleet.Archive.Archive(r.Context(), key)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "this full node holds no copy of "+key.String()+"; ask one of its replicas")
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if refs == nil {
		refs = []ArchivedRef{}
	}
	if !s.operator(r) {
		// As the fetch log's rewrites: a force-push may have taken a
		// secret away, and its id fetches it.
		for i := range refs {
			refs[i].OID = ""
		}
	}
	writeJSON(w, http.StatusOK, ArchivePage{Key: key.String(), Refs: refs})
}
