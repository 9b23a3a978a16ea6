package gitserve

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// A request that is refused says why; Status is the HTTP answer (400 for a
// malformed request, 403 for one that asks what the mirror does not serve).
type requestError struct {
	Status int
	Msg    string
}

func (e *requestError) Error() string { return e.Msg }

func malformed(format string, a ...any) error {
	return &requestError{Status: 400, Msg: fmt.Sprintf(format, a...)}
}

func refused(format string, a ...any) error {
	return &requestError{Status: 403, Msg: fmt.Sprintf(format, a...)}
}

// uploadRequest is what the checks need from an upload-pack request body.
type uploadRequest struct {
	Command   string   // "fetch" or "ls-refs" (v2); "fetch" for v0
	Wants     []string // object ids
	Haves     []string // object ids the client says it has
	Filter    string   // the filter spec, "" for none
	DeepenNot []string // the ref names of deepen-not lines

	Done bool // the client ended its negotiation ("done")

	// The arguments of ls-refs.
	Prefixes              []string
	Symrefs, Peel, Unborn bool

	idLens   [2]bool // ids of 40 and of 64 hex digits seen (want, have, shallow)
	shallows int
	deepen   bool // a deepen line
	since    bool // a deepen-since line
}

// maxShallows bounds the shallow lines of one request as maxWants bounds
// its wants, and maxDeepenNot its deepen-not lines, each of which costs
// upload-pack a look-up among the refs (100,000 took it 30 s): git's
// fetch sends one per --shallow-exclude.
const (
	maxShallows  = maxWants
	maxDeepenNot = 256
)

// maxPkts bounds the pkt-lines of one request (a have line is 50 bytes:
// the body's size bound is the real limit; this one bounds the work).
const maxPkts = 1 << 20

// pktLines splits a request body into pkt-lines. A flush is "0000", a
// delimiter "0001", a response end "0002"; data lines lose their trailing
// newline. A truncated or malformed body is an error.
func pktLines(body []byte) ([]string, error) {
	var out []string
	for len(body) > 0 {
		if len(out) >= maxPkts {
			return nil, malformed("more than %d pkt-lines", maxPkts)
		}
		if len(body) < 4 {
			return nil, malformed("truncated pkt-line length")
		}
		n, err := strconv.ParseUint(string(body[:4]), 16, 16)
		if err != nil {
			return nil, malformed("bad pkt-line length %q", body[:4])
		}
		switch {
		case n <= 2:
			out = append(out, string(body[:4]))
			body = body[4:]
			continue
		case n < 4:
			return nil, malformed("bad pkt-line length %d", n)
		case int(n) > len(body):
			return nil, malformed("truncated pkt-line (%d bytes announced, %d left)", n, len(body))
		}
		out = append(out, strings.TrimSuffix(string(body[4:n]), "\n"))
		body = body[n:]
	}
	return out, nil
}

// parseRequest reads an upload-pack POST body of protocol v2 (v2 true) or
// v0/v1, and refuses what the mirror does not serve: commands other than
// ls-refs and fetch, filters other than cheap ones, and lines git would
// reject only after an upload-pack process has started.
func parseRequest(body []byte, v2 bool) (uploadRequest, error) {
	pkts, err := pktLines(body)
	if err != nil {
		return uploadRequest{}, err
	}
	if len(pkts) == 0 {
		return uploadRequest{}, malformed("empty request")
	}
	var req uploadRequest
	if v2 {
		req, err = parseV2(pkts)
	} else {
		req, err = parseV0(pkts)
	}
	if err == nil && req.deepen && (req.since || len(req.DeepenNot) > 0) {
		err = malformed("deepen cannot be used with deepen-since or deepen-not")
	}
	return req, err
}

// v2 arguments of the commands served; a value follows a space when the
// map says so.
var v2Args = map[string]map[string]bool{
	"ls-refs": {"symrefs": false, "peel": false, "unborn": false, "ref-prefix": true},
	"fetch": {"want": true, "have": true, "done": false, "thin-pack": false, "no-progress": false,
		"include-tag": false, "ofs-delta": false, "shallow": true, "deepen": true, "deepen-relative": false,
		"deepen-since": true, "deepen-not": true, "filter": true, "sideband-all": false, "wait-for-done": false},
}

func parseV2(pkts []string) (uploadRequest, error) {
	var req uploadRequest
	first, ok := strings.CutPrefix(pkts[0], "command=")
	if !ok {
		return req, malformed("protocol v2 request without a command")
	}
	args, served := v2Args[first]
	if !served {
		return req, refused("protocol v2 command %q is not served (only ls-refs and fetch)", truncate(first))
	}
	req.Command = first
	if pkts[len(pkts)-1] != "0000" {
		return req, malformed("protocol v2 request does not end with a flush: truncated")
	}
	i := 1
	for ; i < len(pkts) && pkts[i] != "0001" && pkts[i] != "0000"; i++ {
		// Capabilities: agent, object-format, session-id, server-option.
		k, _, _ := strings.Cut(pkts[i], "=")
		switch k {
		case "agent", "object-format", "session-id", "server-option":
		default:
			return req, malformed("unknown capability %q", truncate(pkts[i]))
		}
	}
	if i < len(pkts) && pkts[i] == "0001" {
		for i++; i < len(pkts)-1; i++ {
			if err := req.arg(args, pkts[i]); err != nil {
				return req, err
			}
		}
	}
	if i != len(pkts)-1 {
		return req, malformed("protocol v2 request has data after its flush")
	}
	return req, nil
}

func (req *uploadRequest) arg(args map[string]bool, line string) error {
	name, val, hasVal := strings.Cut(line, " ")
	wantVal, known := args[name]
	if !known {
		return refused("argument %q of %s is not served", truncate(name), req.Command)
	}
	if wantVal != hasVal || (hasVal && val == "") {
		return malformed("malformed %s line %q", name, truncate(line))
	}
	switch name {
	case "want", "have", "shallow":
		if !gitcmd.IsOID(val) {
			return malformed("%s line without an object id: %q", name, truncate(line))
		}
		req.sawID(val)
		switch name {
		case "want":
			req.Wants = append(req.Wants, val)
		case "have":
			req.Haves = append(req.Haves, val)
		case "shallow":
			if req.shallows++; req.shallows > maxShallows {
				return refused("more than %d shallow lines in one request", maxShallows)
			}
		}
	case "deepen":
		// git's fetch --unshallow asks for 2147483647 (INFINITE_DEPTH).
		if n, err := strconv.ParseUint(val, 10, 31); err != nil || n == 0 || val[0] == '0' {
			return malformed("bad deepen %q: a depth from 1 to 2147483647", truncate(val))
		}
		req.deepen = true
	case "deepen-since":
		if n, err := strconv.ParseUint(val, 10, 62); err != nil || n == 0 || val[0] == '0' {
			return malformed("bad deepen-since %q: a time in seconds since 1970", truncate(val))
		}
		req.since = true
	case "deepen-not":
		if len(req.DeepenNot) >= maxDeepenNot {
			return refused("more than %d deepen-not lines in one request", maxDeepenNot)
		}
		if !refNameOK(val) {
			return malformed("bad deepen-not %q: not a ref name", truncate(val))
		}
		req.DeepenNot = append(req.DeepenNot, val)
	case "filter":
		if err := checkFilter(val); err != nil {
			return err
		}
		req.Filter = val
	case "done":
		req.Done = true
	case "ref-prefix":
		req.Prefixes = append(req.Prefixes, val)
	case "symrefs":
		req.Symrefs = true
	case "peel":
		req.Peel = true
	case "unborn":
		req.Unborn = true
	}
	return nil
}

// v0 lines of a fetch request, as git's fetch-pack sends them.
var v0Args = map[string]bool{"want": true, "have": true, "shallow": true, "deepen": true,
	"deepen-since": true, "deepen-not": true, "filter": true, "done": false}

func parseV0(pkts []string) (uploadRequest, error) {
	req := uploadRequest{Command: "fetch"}
	if last := pkts[len(pkts)-1]; last != "0000" && last != "done" {
		return req, malformed("request does not end with a flush or done: truncated")
	}
	for i, p := range pkts {
		if p == "0000" {
			continue
		}
		if len(p) == 4 && p[:3] == "000" {
			return req, malformed("unexpected special packet %q", p)
		}
		if i == 0 {
			// The first want carries the capabilities after the id.
			if want, ok := strings.CutPrefix(p, "want "); ok && len(want) > 40 {
				if oid, _, _ := strings.Cut(want, " "); gitcmd.IsOID(oid) {
					req.sawID(oid)
					req.Wants = append(req.Wants, oid)
					continue
				}
			}
		}
		if err := req.arg(v0Args, p); err != nil {
			return req, err
		}
	}
	return req, nil
}

func (req *uploadRequest) sawID(oid string) { req.idLens[len(oid)/64] = true }

// checkIDs refuses object ids of another length than the repository's
// (hexLen: 40 for SHA-1, 64 for SHA-256), which git would take for a
// protocol error or a malformed name and fail on.
func (req *uploadRequest) checkIDs(hexLen int) error {
	if other := (hexLen/64 + 1) % 2; req.idLens[other] {
		return malformed("an object id of %d hex digits: this repository's have %d", 40+24*other, hexLen)
	}
	return nil
}

// refNameOK says whether a deepen-not names a ref as git spells one: no
// control characters, spaces or any of ~^:?*[\, no "..", "@{", "//" or
// leading "-" or "/", and a bounded length. (It leaves out what would
// make the name a pattern or an option for the look-up.)
func refNameOK(name string) bool {
	if name == "" || len(name) > 1024 || name[0] == '-' || name[0] == '/' || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") {
		return false
	}
	for _, bad := range []string{"..", "@{", "//", "/."} {
		if strings.Contains(name, bad) {
			return false
		}
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("~^:?*[\\", c) >= 0 {
			return false
		}
	}
	return true
}

// checkFilter allows only the filters that are cheap to serve: no blobs,
// blobs up to a size, or no trees beyond the commits.
func checkFilter(spec string) error {
	switch {
	case spec == "blob:none", spec == "tree:0":
		return nil
	case strings.HasPrefix(spec, "blob:limit="):
		n := strings.TrimPrefix(spec, "blob:limit=")
		n = strings.TrimRight(strings.ToLower(n), "kmg")
		if len(spec)-len("blob:limit=")-len(n) <= 1 && n != "" && len(n) <= 19 && strings.Trim(n, "0123456789") == "" {
			return nil
		}
		return malformed("bad filter %q", truncate(spec))
	}
	return refused("filter %q is not served (only blob:none, blob:limit=N and tree:0)", truncate(spec))
}

// checkProtocol validates a Git-Protocol header: empty, version=1 or
// version=2. It returns whether protocol v2 is asked for.
func checkProtocol(h string) (v2 bool, err error) {
	switch h {
	case "", "version=0", "version=1":
		return false, nil
	case "version=2":
		return true, nil
	}
	return false, malformed("Git-Protocol %q is not served (want version=2, version=1 or none)", truncate(h))
}

func truncate(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// clientFault says whether a failed upload-pack failed for its request's
// fault, as its message says (a deepen-not that excludes every commit, a
// protocol error that the checks before git let through), and returns
// the message. The client gets 400, and the repository is not at fault.
func clientFault(err error) (string, bool) {
	var ge *gitcmd.Error
	if err == nil || !errors.As(err, &ge) || ge.Class == gitcmd.ClassBadObjects {
		return "", false
	}
	for _, m := range gitFaults {
		if i := strings.Index(ge.Stderr, m); i >= 0 {
			msg, _, _ := strings.Cut(ge.Stderr[i:], "\n")
			return truncate(msg), true
		}
	}
	return "", false
}

// gitFaults are what upload-pack (git 2.39 and later) says as it dies on
// a request at fault.
var gitFaults = []string{"ambiguous deepen-not", "not our ref", "protocol error", "Invalid deepen", "cannot be used together",
	"no commits selected for shallow requests", "capability not negotiated", "expected SHA1", "invalid shallow line",
	"unexpected line: ", "expected flush after fetch arguments"}

// errAs returns err as a *requestError when it is one.
func errAs(err error) (*requestError, bool) {
	var re *requestError
	ok := errors.As(err, &re)
	return re, ok
}
