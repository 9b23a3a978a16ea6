// Package bandwidth is a volunteer's cap on the bytes their node moves
// (--max-bandwidth): a rate as people write it (20Mbit, 2MiB/s) and one
// token bucket of bytes that every connection it paces shares.
//
// The node paces where the bytes pass: reads on the connections its egress
// dialer makes to upstreams (git's downloads, through the egress proxy),
// and writes on the tunnels through which full nodes pull its mirrors (its
// uploads). A Limiter is the only thing here that tells the time: it paces
// real bytes on real sockets on the wall clock, or on the clock a test
// gives it (NewLimiterOn), so that the pace it keeps is checked on its own
// schedule rather than against a busy machine's.
package bandwidth

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Rate is a number of bytes per second; 0 is no cap.
type Rate int64

// MinRate is the smallest cap Parse accepts: below it, git's own timeouts
// and the coordinator's would cut the node's transfers.
const MinRate Rate = 1000

// ErrSyntax is what Parse's errors wrap when the text is not a rate.
var ErrSyntax = errors.New("not a rate")

// Parse reads a rate: a number and a unit, optionally followed by "/s" or
// "ps". Bytes are B, KB, MB, GB (powers of 1000) and KiB, MiB, GiB (powers
// of 1024); bits are bit or b with the same prefixes (20Mbit, 100Mbps,
// 512kbit/s). The prefix letter's case does not matter; b (bits) and B
// (bytes) do. "" and "0" mean no cap.
func Parse(in string) (Rate, error) {
	s := strings.TrimSpace(in)
	if s == "" || s == "0" {
		return 0, nil
	}
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	if i == 0 {
		return 0, fmt.Errorf("bandwidth %q: %w: it must start with a number, e.g. 20Mbit or 2MiB/s", in, ErrSyntax)
	}
	num, unit := s, ""
	if i > 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, fmt.Errorf("bandwidth %q: %w: %q is not a number", in, ErrSyntax, num)
	}
	if unit == "" {
		return 0, fmt.Errorf("bandwidth %q: %w: no unit; say bytes (2MiB/s, 500KB/s) or bits (20Mbit, 100Mbps) per second", in, ErrSyntax)
	}
	mult, ok := unitBytes(unit)
	if !ok {
		return 0, fmt.Errorf("bandwidth %q: %w: unknown unit %q; say bytes (B, KB, MB, GB, KiB, MiB, GiB) or bits (bit, Kbit, Mbit, Gbit, Mbps) per second", in, ErrSyntax, unit)
	}
	bytes := x * mult
	if bytes > math.MaxInt64/2 {
		return 0, fmt.Errorf("bandwidth %q: too large", in)
	}
	r := Rate(math.Round(bytes))
	if r == 0 && x == 0 {
		return 0, nil
	}
	if r < MinRate {
		return 0, fmt.Errorf("bandwidth %q is under %s (8kbit/s): git would time out at that pace; leave it empty for no cap", in, MinRate)
	}
	return r, nil
}

// unitBytes is the number of bytes a unit of rate stands for.
func unitBytes(unit string) (float64, bool) {
	u := unit
	if v, ok := strings.CutSuffix(u, "/s"); ok {
		u = v
	} else if v, ok := strings.CutSuffix(u, "ps"); ok {
		u = v
	}
	var prefix float64 = 1
	var binary float64 = 1
	if u != "" && strings.ContainsRune("kKmMgG", rune(u[0])) && len(u) > 1 {
		exp := strings.IndexRune("kmg", unicode.ToLower(rune(u[0]))) + 1
		prefix, binary = math.Pow(1000, float64(exp)), math.Pow(1024, float64(exp))
		u = u[1:]
		if v, ok := strings.CutPrefix(u, "i"); ok {
			prefix, u = binary, v
		}
	} else if u == "" {
		return 0, false
	}
	switch u {
	case "B":
		return prefix, true
	case "b", "bit", "Bit":
		return prefix / 8, true
	}
	return 0, false
}

// String writes r in binary units of bytes per second: "2MiB/s",
// "2.38MiB/s"; "none" for no cap.
func (r Rate) String() string {
	if r <= 0 {
		return "none"
	}
	x, unit := float64(r), "B/s"
	for _, u := range []string{"KiB/s", "MiB/s", "GiB/s"} {
		if x < 1024 {
			break
		}
		x, unit = x/1024, u
	}
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64) + unit
}
