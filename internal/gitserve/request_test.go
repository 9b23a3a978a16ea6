package gitserve

import (
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

func pkt(s string) string {
	const hex = "0123456789abcdef"
	n := len(s) + 4
	return string([]byte{hex[n>>12&0xf], hex[n>>8&0xf], hex[n>>4&0xf], hex[n&0xf]}) + s
}

const oid = "0123456789abcdef0123456789abcdef01234567"

func TestParseRequestReadsWhatGitSends(t *testing.T) {
	v2 := pkt("command=fetch\n") + pkt("agent=git/2.39.5\n") + pkt("object-format=sha1\n") + "0001" +
		pkt("thin-pack\n") + pkt("ofs-delta\n") + pkt("want "+oid+"\n") + pkt("filter blob:none\n") + pkt("done\n") + "0000"
	req, err := parseRequest([]byte(v2), true)
	if err != nil || req.Command != "fetch" || len(req.Wants) != 1 || req.Wants[0] != oid || req.Filter != "blob:none" {
		t.Fatalf("v2 fetch: %+v, %v", req, err)
	}
	v0 := pkt("want "+oid+" multi_ack_detailed side-band-64k thin-pack ofs-delta agent=git/2.39.5\n") +
		pkt("want "+strings.Repeat("ab", 20)+"\n") + pkt("deepen 1\n") + "0000" + pkt("have "+oid+"\n") + pkt("done\n")
	req, err = parseRequest([]byte(v0), false)
	if err != nil || len(req.Wants) != 2 {
		t.Fatalf("v0 fetch: %+v, %v", req, err)
	}
	ls := pkt("command=ls-refs\n") + pkt("agent=git/2.39.5\n") + "0001" + pkt("peel\n") + pkt("symrefs\n") + pkt("unborn\n") + pkt("ref-prefix HEAD\n") + "0000"
	if req, err := parseRequest([]byte(ls), true); err != nil || req.Command != "ls-refs" {
		t.Fatalf("ls-refs: %+v, %v", req, err)
	}
}

func TestCheckFilterAllowsOnlyCheapFilters(t *testing.T) {
	for spec, ok := range map[string]bool{
		"blob:none": true, "tree:0": true, "blob:limit=0": true, "blob:limit=1024": true, "blob:limit=1k": true, "blob:limit=10m": true,
		"blob:limit=": false, "blob:limit=1x": false, "blob:limit=1kk": false, "tree:1": false, "sparse:oid=HEAD:f": false,
		"sparse:path=/etc/passwd": false, "object:type=blob": false, "combine:blob:none+tree:0": false, "": false,
	} {
		if err := checkFilter(spec); (err == nil) != ok {
			t.Errorf("filter %q: %v, want allowed %v", spec, err, ok)
		}
	}
}

// FuzzParseRequest: whatever the body, parseRequest answers a request or a
// 4xx, never panics, and what it accepts holds only object ids as wants
// and a cheap filter.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(pkt("command=fetch\n")+"0001"+pkt("want "+oid+"\n")+pkt("done\n")+"0000"), true)
	f.Add([]byte(pkt("command=object-info\n")+"0001"+pkt("size\n")+"0000"), true)
	f.Add([]byte(pkt("want "+oid+" ofs-delta\n")+"0000"+pkt("done\n")), false)
	f.Add([]byte("0000"), false)
	f.Fuzz(func(t *testing.T, body []byte, v2 bool) {
		req, err := parseRequest(body, v2)
		if err != nil {
			if re, ok := errAs(err); !ok || re.Status < 400 || re.Status > 499 {
				t.Fatalf("error %v is not a 4xx", err)
			}
			return
		}
		for _, w := range req.Wants {
			if !gitcmd.IsOID(w) {
				t.Fatalf("accepted want %q", w)
			}
		}
		if req.Filter != "" && checkFilter(req.Filter) != nil {
			t.Fatalf("accepted filter %q", req.Filter)
		}
		if req.Command != "fetch" && req.Command != "ls-refs" {
			t.Fatalf("accepted command %q", req.Command)
		}
	})
}
