package repoview

import "math"

// nameTable numbers the few names that every repository repeats (error
// classes) so that a repository keeps a byte instead of a string.
// Past 256 names the last number is shared (there are about twenty).
type nameTable struct {
	names []string
	index map[string]uint8
}

// id returns s's number, adding it.
func (t *nameTable) id(s string) uint8 {
	if i, ok := t.index[s]; ok {
		return i
	}
	if len(t.names) > math.MaxUint8 {
		return math.MaxUint8
	}
	if t.index == nil {
		t.index = map[string]uint8{}
	}
	i := uint8(len(t.names))
	t.names = append(t.names, s)
	t.index[s] = i
	return i
}

// name returns the name numbered i.
func (t *nameTable) name(i uint8) string { return t.names[i] }
