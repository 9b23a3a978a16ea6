package mirror_test

import (
	"testing"

	"github.com/gitfleet/gitfleet/internal/mirror"
)

// The members of a fork network weigh their own files and the pool once
// between them: their sizes add up to the pool and their own directories.
func TestAForkNetworksSizesCountItsPoolOnce(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 3)
	keys := syncForks(t, st, up, forks, "base")
	pool, err := mirror.TreeSize(st.PoolPath("base"))
	if err != nil {
		t.Fatal(err)
	}
	var own, sum int64
	for _, k := range keys {
		n, err := mirror.TreeSize(st.Path(k))
		if err != nil {
			t.Fatal(err)
		}
		size, err := st.Size(k)
		if err != nil {
			t.Fatal(err)
		}
		own += n
		sum += size
	}
	// Each member's part is the pool over the members, rounded down.
	if want := own + pool; sum > want || sum < want-int64(len(keys)) {
		t.Errorf("the members' sizes add up to %d, want %d: their own %d and the pool's %d once", sum, want, own, pool)
	}
	if pool == 0 || own == 0 {
		t.Fatalf("pool %d, members %d bytes: nothing measured", pool, own)
	}
}
