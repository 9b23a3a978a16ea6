// Package doctor checks that a machine is ready to run a gitfleet role: the
// installed git and the features gitfleet relies on, the data directory
// (free space, writable), the catalog repository (coordinator, up), the
// coordinator's and the full node's reachability, the clock's skew against
// the full node, the TLS files and the tokens the role needs. Each check gives one Result: ok, warn or fail,
// with what to do. The judgements (Judge*) are pure; Run does the I/O.
package doctor

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// Status is the outcome of one check.
type Status int

// The outcomes, from best to worst.
const (
	OK Status = iota
	Warn
	Fail
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Warn:
		return "warn"
	default:
		return "fail"
	}
}

// Result is the outcome of one check: what was found, and (unless OK) what
// to do about it.
type Result struct {
	Check  string
	Status Status
	Detail string
	Fix    string
}

// Print writes one line per result and reports whether any failed.
func Print(w io.Writer, results []Result) (failed bool) {
	for _, r := range results {
		line := fmt.Sprintf("%-4s  %-22s %s", r.Status, r.Check, r.Detail)
		if r.Status != OK && r.Fix != "" {
			line += " -- " + r.Fix
		}
		fmt.Fprintln(w, line)
		if r.Status == Fail {
			failed = true
		}
	}
	return failed
}

// The first git versions with each feature gitfleet relies on.
var (
	protocolV2Version   = gitcmd.Version{Major: 2, Minor: 18}
	fetchStdinVersion   = gitcmd.Version{Major: 2, Minor: 29} // also negative refspecs
	configCountVersion  = gitcmd.Version{Major: 2, Minor: 31}
	treeDepthGitVersion = gitcmd.TreeDepthVersion
	// git 2.52's upload-pack stops keeping every duplicate "have" a client
	// sends: before it, one request can make it use memory and CPU without
	// bound (the request's size bound is the only limit).
	dupHavesVersion = gitcmd.Version{Major: 2, Minor: 52}
)

// JudgeGit judges the installed git's version: a missing feature gitfleet
// needs fails; a missing guard (core.maxTreeDepth, the bound on duplicate
// haves) warns.
func JudgeGit(v gitcmd.Version) []Result {
	need := func(name string, min gitcmd.Version) Result {
		r := Result{Check: "git " + name, Detail: fmt.Sprintf("git %s (needs %d.%d)", v, min.Major, min.Minor)}
		if !v.AtLeast(min.Major, min.Minor) {
			r.Status = Fail
			r.Fix = fmt.Sprintf("install git %d.%d or later", min.Major, min.Minor)
		}
		return r
	}
	out := []Result{
		need("protocol v2", protocolV2Version),
		need("fetch --stdin", fetchStdinVersion),
		need("negative refspecs", fetchStdinVersion),
		need("GIT_CONFIG_COUNT", configCountVersion),
	}
	td := need("core.maxTreeDepth", treeDepthGitVersion)
	if td.Status == Fail {
		td.Status = Warn
		td.Fix = "deep trees are not bounded (--max-tree-depth is ignored); install git 2.43 or later"
	}
	dh := need("duplicate haves", dupHavesVersion)
	if dh.Status == Fail {
		dh.Status = Warn
		dh.Fix = "a fetch request's duplicate haves cost the served upload-pack without bound (only --serve-max-request limits them); " +
			"install git 2.52 or later (a distribution's backports, or git built from source) on full nodes"
	}
	return append(out, td, dh)
}

// JudgeCase judges the case rules of the data directory's file system: one
// that folds case holds repositories apart (their directories escape upper
// case) but not two refs that differ only in case, of which one is skipped.
func JudgeCase(dir string, folds bool) Result {
	if !folds {
		return Result{Check: "file system case", Detail: dir + " is case-sensitive"}
	}
	return Result{Check: "file system case", Status: Warn,
		Detail: dir + " is case-insensitive: of two refs that differ only in case (Master, master), one is not mirrored",
		Fix:    "put --data on a case-sensitive file system (APFS case-sensitive volume, ext4, or a WSL2 disk)"}
}

// JudgeDisk judges the free space of the data directory's file system:
// under 1 GiB or 5% fails, under 10 GiB or 15% warns.
func JudgeDisk(dir string, free, total uint64) Result {
	const gib = 1 << 30
	r := Result{Check: "disk", Detail: fmt.Sprintf("%s: %.1f GiB free of %.1f GiB", dir, float64(free)/gib, float64(total)/gib)}
	share := 1.0
	if total > 0 {
		share = float64(free) / float64(total)
	}
	switch {
	case free < gib || share < 0.05:
		r.Status, r.Fix = Fail, "free space on the file system of --data, or point --data elsewhere"
	case free < 10*gib || share < 0.15:
		r.Status, r.Fix = Warn, "little room for mirrors: free space or set --disk-quota"
	}
	return r
}

// Skew limits: the Date header has a resolution of one second.
const (
	skewWarn = 5 * time.Second
	skewFail = time.Minute
)

// JudgeSkew judges this machine's clock against a peer's Date header, taken
// halfway through the request (sent, received).
func JudgeSkew(peer string, date string, sent, received time.Time) Result {
	r := Result{Check: "clock skew"}
	t, err := time.Parse(time.RFC1123, date)
	if err != nil {
		r.Status, r.Detail, r.Fix = Warn, fmt.Sprintf("%s sent no readable Date header (%q)", peer, date), "check the full node's HTTP front"
		return r
	}
	mid := sent.Add(received.Sub(sent) / 2)
	skew := mid.Sub(t).Truncate(time.Second)
	r.Detail = fmt.Sprintf("%v against %s", skew, peer)
	if skew < 0 {
		skew = -skew
	}
	// One second is the header's resolution, plus the round trip.
	switch {
	case skew >= skewFail:
		r.Status, r.Fix = Fail, "run NTP (systemd-timesyncd, chrony) here and on the full node"
	case skew >= skewWarn:
		r.Status, r.Fix = Warn, "run NTP (systemd-timesyncd, chrony) here and on the full node"
	}
	return r
}

// identityFile is where a node keeps its registration, in its data
// directory (internal/node).
const identityFile = "node.json"

// Role is the role a machine is checked for.
type Role string

// The roles.
const (
	Coordinator Role = "coordinator"
	Full        Role = "full"
	Partial     Role = "partial"
	// Up is a coordinator and a full node in one process (gitfleet up).
	Up Role = "up"
)

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	switch s {
	case "coordinator", "full", "partial", "up":
		return Role(s), nil
	}
	return "", fmt.Errorf("doctor: unknown role %q (coordinator, full, partial or up)", s)
}

// JudgeTokens judges the tokens the role needs: a partial node needs the
// join token unless it is registered already (its identity admits it), a
// full node the full token, a coordinator both (it refuses to start without
// a join token, and admits no full node without the full one).
func JudgeTokens(role Role, joinToken, fullToken string, registered bool) []Result {
	tok := func(name, env, value, why string) Result {
		r := Result{Check: "token " + name, Detail: "--" + name + " is set"}
		if strings.TrimSpace(value) == "" {
			r.Status = Fail
			r.Detail = "--" + name + " is empty"
			r.Fix = fmt.Sprintf("set --%s or %s (%s)", name, env, why)
		}
		return r
	}
	join := func(why string) Result { return tok("join-token", "GITFLEET_JOIN_TOKEN", joinToken, why) }
	full := func(why string) Result { return tok("full-token", "GITFLEET_FULL_TOKEN", fullToken, why) }
	switch role {
	case Partial:
		if registered && strings.TrimSpace(joinToken) == "" {
			return []Result{{Check: "token join-token", Detail: "--join-token is empty, but this node is registered (" + identityFile + "): it needs the token only to register anew"}}
		}
		return []Result{join("the coordinator admits no new node without it")}
	case Full:
		return []Result{full("the coordinator admits no full node without it")}
	default:
		return []Result{join("the coordinator does not start without it"), full("no full node can join")}
	}
}

// JudgeUpTokens judges the tokens of gitfleet up, which makes both itself
// (the join token kept in its data directory, the full token for its own
// full node) unless it shares a fleet through etcd (shared): then every
// machine must be given the same ones.
func JudgeUpTokens(joinToken, fullToken string, shared bool) []Result {
	tok := func(name, env, value, made string) Result {
		r := Result{Check: "token " + name, Detail: "--" + name + " is set"}
		switch {
		case strings.TrimSpace(value) != "":
		case shared:
			r.Status, r.Detail = Fail, "--"+name+" is empty, and up shares a fleet through --etcd"
			r.Fix = fmt.Sprintf("give every machine the same --%s (or %s)", name, env)
		default:
			r.Detail = "--" + name + " is empty: up " + made
		}
		return r
	}
	return []Result{
		tok("join-token", "GITFLEET_JOIN_TOKEN", joinToken, "makes one at its first start and keeps it in its data directory (join-token)"),
		tok("full-token", "GITFLEET_FULL_TOKEN", fullToken, "makes one for its own full node"),
	}
}

// JudgeCertificate judges a loaded certificate's validity at now: expired
// or not yet valid fails, expiring within 14 days warns.
func JudgeCertificate(file string, notBefore, notAfter, now time.Time) Result {
	r := Result{Check: "tls files", Detail: fmt.Sprintf("%s matches its key, valid until %s", file, notAfter.UTC().Format(time.DateOnly))}
	switch {
	case now.After(notAfter):
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s expired on %s", file, notAfter.UTC().Format(time.DateOnly)), "renew the certificate"
	case now.Before(notBefore):
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s is not valid before %s", file, notBefore.UTC().Format(time.RFC3339)), "check this machine's clock, or the certificate"
	case notAfter.Sub(now) < 14*24*time.Hour:
		r.Status, r.Fix = Warn, "renew the certificate soon"
	}
	return r
}
