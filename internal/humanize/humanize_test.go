package humanize

import "testing"

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB", 1<<64 - 1: "16.0 EiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCountSeparatesThousands(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0"}, {7, "7"}, {999, "999"}, {1000, "1,000"}, {100000, "100,000"}, {1234567, "1,234,567"}, {-1234, "-1,234"}} {
		if got := Count(c.n); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := Count(uint64(1<<64 - 1)); got != "18,446,744,073,709,551,615" {
		t.Errorf("Count(max uint64) = %q", got)
	}
}

func TestPluralFitsTheNounToTheCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 checks"}, {1, "1 check"}, {2, "2 checks"}, {1000, "1,000 checks"}} {
		if got := Plural(c.n, "check", "checks"); got != c.want {
			t.Errorf("Plural(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := Plural(uint64(1), "repository", "repositories"); got != "1 repository" {
		t.Errorf("Plural(1 repository) = %q", got)
	}
}
