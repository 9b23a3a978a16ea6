package secretfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTheFirstCallMakesTheSecretAndLaterCallsReadIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "join-token")
	first, created, err := ReadOrCreate(path)
	if err != nil || !created || len(first) != 26 { // crypto/rand.Text
		t.Fatalf("first call: %q, created %v, %v", first, created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v, %v; want it readable by its owner only", st, err)
	}
	again, created, err := ReadOrCreate(path)
	if err != nil || created || again != first {
		t.Fatalf("second call: %q, created %v, %v; want %q as it was", again, created, err, first)
	}
	if err := os.WriteFile(path, []byte("chosen-by-hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, created, err := ReadOrCreate(path); err != nil || created || s != "chosen-by-hand" {
		t.Fatalf("a secret put there by hand: %q, %v, %v", s, created, err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, created, err := ReadOrCreate(path); err != nil || !created || s == "" || s == first {
		t.Fatalf("an empty file: %q, created %v, %v; want a new secret", s, created, err)
	}
}

func TestAnUnreadableFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := ReadOrCreate(dir); err == nil { // a directory
		t.Fatal("a directory read as a secret")
	}
}
