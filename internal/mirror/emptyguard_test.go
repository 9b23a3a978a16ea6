package mirror_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

func TestSyncAppliesAnEmptyAdvertisementOnlyWhenASecondCheckConfirmsIt(t *testing.T) {
	up, st := setup(t)
	if err := up.Create("e", []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("e")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	full, _ := up.Refs("e")
	bare := filepath.Join(up.Dir, "e.git")
	empty := func() {
		t.Helper()
		for ref := range full {
			if err := gittest.Git(bare, "update-ref", "-d", ref); err != nil {
				t.Fatal(err)
			}
		}
	}
	restore := func() {
		t.Helper()
		for ref, oid := range full {
			if err := gittest.Git(bare, "update-ref", ref, oid); err != nil {
				t.Fatal(err)
			}
		}
	}
	served := func() map[string]string {
		t.Helper()
		refs, err := st.Refs(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return refs.Refs
	}

	empty()
	if _, err := st.Sync(ctx, key, url); !errors.Is(err, mirror.ErrEmptyAdvertisement) {
		t.Fatalf("first empty advertisement: %v", err)
	}
	if !reflect.DeepEqual(served(), full) {
		t.Fatalf("refs vanished at once: %v", served())
	}
	// A source that comes back clears the suspicion: emptiness must be seen twice in a row.
	restore()
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	empty()
	if _, err := st.Sync(ctx, key, url); !errors.Is(err, mirror.ErrEmptyAdvertisement) {
		t.Fatalf("empty again after a full advertisement: %v", err)
	}
	res, err := st.Sync(ctx, key, url)
	if err != nil {
		t.Fatalf("confirmed empty advertisement: %v", err)
	}
	if len(served()) != 0 || !res.Changed {
		t.Fatalf("confirmed emptiness not applied: %+v, %v", res, served())
	}
}
