package intern

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

func TestPackSharesOneCopyOfErrorsThatDifferByTheirRepository(t *testing.T) {
	tab := New(100)
	var packed []string
	for i := range 1000 {
		key := fmt.Sprintf("github.com/group/repo-%d", i)
		url := "https://" + key
		msg := fmt.Sprintf("git ls-remote %s: network: fatal: unable to access '%s/': CONNECT tunnel failed, response 502", url, url)
		p := tab.Pack(msg, url, key)
		if got := Unpack(p, url, key); got != msg {
			t.Fatalf("Unpack(Pack(%q)) = %q", msg, got)
		}
		packed = append(packed, p)
	}
	if n := tab.Len(); n != 1 {
		t.Fatalf("the table holds %d texts for one error of 1000 repositories, want 1", n)
	}
	if unsafe.StringData(packed[0]) != unsafe.StringData(packed[999]) {
		t.Error("two repositories' packed errors are separate copies")
	}
}

// The table stays within its bound, and texts that vary every time (a
// remote's message, a port) cannot stop it sharing the texts that come
// after them.
func TestPackBoundsTheTableAndKeepsSharing(t *testing.T) {
	tab := New(10)
	for i := range 100 {
		msg := fmt.Sprintf("error %d", i)
		if got := Unpack(tab.Pack(msg), ""); got != msg {
			t.Fatalf("past the bound: %q, want %q", got, msg)
		}
		if n := tab.Len(); n > 10 {
			t.Fatalf("table holds %d, over its bound 10", n)
		}
	}
	a := tab.Pack("host down: https://h/a", "https://h/a")
	b := tab.Pack("host down: https://h/b", "https://h/b")
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("after 100 distinct texts, two repositories' errors are no longer shared")
	}
	long := strings.Repeat("x", maxLen+1)
	if got := Unpack(tab.Pack(long)); got != long {
		t.Fatal("a long text does not come back whole")
	}
}

// A text with NULs of its own (stderr is whatever the remote sent) cannot
// make Unpack put a name where the text had none.
func TestPackNeutralisesMarkersInTheText(t *testing.T) {
	tab := New(10)
	msg := "remote: \x001\x002 sneaky"
	got := Unpack(tab.Pack(msg, "https://h/a", "h/a"), "https://h/a", "h/a")
	if strings.Contains(got, "h/a") || strings.Contains(got, "\x00") {
		t.Fatalf("got %q", got)
	}
	if got != "remote: \uFFFD1\uFFFD2 sneaky" {
		t.Fatalf("got %q", got)
	}
}

func TestUnpackLeavesPlainTextsAlone(t *testing.T) {
	if got := Unpack("plain", "x"); got != "plain" {
		t.Fatal(got)
	}
	if got := New(1).Pack(""); got != "" {
		t.Fatalf("empty text packed as %q", got)
	}
}

func FuzzPackRoundTrip(f *testing.F) {
	f.Add("fatal: https://h/a/b: h/a/b not found", "https://h/a/b", "h/a/b")
	f.Add("a\x00b", "a", "")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, msg, url, key string) {
		tab := New(4)
		p := tab.Pack(msg, url, key)
		want := strings.ReplaceAll(msg, "\x00", "\uFFFD")
		if got := Unpack(p, url, key); got != want {
			t.Fatalf("Unpack(Pack(%q, %q, %q)) = %q, want %q", msg, url, key, got, want)
		}
	})
}
