package mirror

import (
	"os"
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Size is what key's mirror costs on disk, as the full tier weighs it: its
// own files, and for a member of a fork network its part of the pool (the
// pool's size over the members it has), so that the members' sizes add up
// to the network's with the pool counted once.
func (s *Store) Size(key repokey.Key) (int64, error) {
	n, err := TreeSize(s.Path(key))
	if err != nil {
		return 0, err
	}
	if network := s.Network(key); network != "" {
		ents, _ := os.ReadDir(filepath.Join(s.PoolPath(network), membersDir))
		if pool, err := TreeSize(s.PoolPath(network)); err == nil && len(ents) > 0 {
			n += pool / int64(len(ents))
		}
	}
	return n, nil
}
