package gitserve

import "testing"

func TestPackKeyIgnoresTheAgentButNotWhatDecidesThePack(t *testing.T) {
	other := "89abcdef0123456789abcdef0123456789abcdef"
	v2 := func(agent string, args ...string) []byte {
		s := pkt("command=fetch\n") + pkt("agent="+agent+"\n") + pkt("object-format=sha1\n") + "0001"
		for _, a := range args {
			s += pkt(a + "\n")
		}
		return []byte(s + "0000")
	}
	key := func(gp string, state string, body []byte, isV2 bool) string {
		k, err := packKey("/r.git", gp, []byte(state), body, isV2)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := key("version=2", "s", v2("git/2.39.5", "want "+oid, "done"), true)
	if k := key("version=2", "s", v2("git/2.47.0", "want "+oid, "done"), true); k != base {
		t.Error("another agent changed the key")
	}
	for name, k := range map[string]string{
		"another want":     key("version=2", "s", v2("git/2.39.5", "want "+other, "done"), true),
		"a have":           key("version=2", "s", v2("git/2.39.5", "want "+oid, "have "+other, "done"), true),
		"a filter":         key("version=2", "s", v2("git/2.39.5", "want "+oid, "filter blob:none", "done"), true),
		"no-progress":      key("version=2", "s", v2("git/2.39.5", "want "+oid, "no-progress", "done"), true),
		"other refs":       key("version=2", "t", v2("git/2.39.5", "want "+oid, "done"), true),
		"another protocol": key("", "s", v2("git/2.39.5", "want "+oid, "done"), true),
	} {
		if k == base {
			t.Errorf("%s: same key", name)
		}
	}
	v0 := func(caps string) []byte {
		return []byte(pkt("want "+oid+" "+caps+"\n") + "0000" + pkt("done\n"))
	}
	if key("", "s", v0("side-band-64k ofs-delta agent=git/2.39.5"), false) != key("", "s", v0("side-band-64k ofs-delta agent=git/2.30.0"), false) {
		t.Error("v0: another agent changed the key")
	}
	if key("", "s", v0("side-band-64k ofs-delta"), false) == key("", "s", v0("side-band ofs-delta"), false) {
		t.Error("v0: another side band, same key")
	}
}
