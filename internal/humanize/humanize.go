// Package humanize writes figures for people: the command line and the
// console show sizes, counts and plurals the same way.
package humanize

import (
	"fmt"
	"strconv"
)

// Bytes writes n in binary units: "512 B", "1.5 KiB", "3.2 GiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Integer is the integers Count writes.
type Integer interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64
}

// Count writes n with its thousands separated by commas: "100,000".
func Count[N Integer](n N) string {
	s := strconv.FormatInt(int64(n), 10)
	if n > 0 && int64(n) < 0 { // a uint64 past int64
		s = strconv.FormatUint(uint64(n), 10)
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Plural writes n and the noun that fits it: "1 check", "2 checks",
// "100,000 repositories".
func Plural[N Integer](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Count(n) + " " + many
}
