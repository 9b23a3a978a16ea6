package gitserve

import (
	"bytes"
	"testing"
)

// An advertisement split anywhere across writes comes out the same, less
// the lines dropped; output that stops being pkt-lines goes through.
func TestPktWriterFiltersWholeLinesWhereverTheWritesSplit(t *testing.T) {
	in := pktLine("version 2\n") + pktLine("agent=git/2.39.5\n") + pktLine("ls-refs=unborn\n") +
		pktLine("fetch=shallow wait-for-done filter\n") + pktLine("object-info\n") + pktLine("bundle-uri\n") +
		pktLine("object-format=sha1\n") + "0000"
	want := pktLine("version 2\n") + pktLine("agent=git/2.39.5\n") + pktLine("ls-refs=unborn\n") +
		pktLine("fetch=shallow wait-for-done filter\n") + pktLine("object-format=sha1\n") + "0000"
	for _, step := range []int{1, 3, 7, len(in)} {
		var out bytes.Buffer
		p := &pktWriter{w: &out, each: servedCapability}
		for i := 0; i < len(in); i += step {
			if _, err := p.Write([]byte(in[i:min(i+step, len(in))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.rest(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("writes of %d bytes: got %q, want %q", step, out.String(), want)
		}
	}
	var out bytes.Buffer
	p := &pktWriter{w: &out, each: func([]byte) bool { return false }}
	_, _ = p.Write([]byte("0000zzzz tail"))
	_, _ = p.Write([]byte(" more"))
	if out.String() != "zzzz tail more" {
		t.Errorf("output that is not pkt-lines: got %q", out.String())
	}
}
