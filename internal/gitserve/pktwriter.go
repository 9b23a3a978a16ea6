package gitserve

import (
	"io"
	"strconv"
	"strings"
)

// pktWriter passes upload-pack's output on to w, showing each whole
// pkt-line to each, which drops it by returning false. The pkt-lines that
// one Write completes go out in one write (a 16,000-ref listing is not
// 16,000 flushes); a partial one waits for its end, or for rest. Output
// that is not pkt-lines goes through unchanged, from where it stops being
// pkt-lines.
type pktWriter struct {
	w    io.Writer
	each func(pkt []byte) bool

	buf []byte
	raw bool // the output stopped being pkt-lines
}

func (p *pktWriter) Write(b []byte) (int, error) {
	if p.raw {
		return p.w.Write(b)
	}
	p.buf = append(p.buf, b...)
	var out []byte
	i := 0
	for len(p.buf)-i >= 4 {
		n, err := strconv.ParseUint(string(p.buf[i:i+4]), 16, 16)
		if err != nil || (n > 2 && n < 4) {
			p.raw = true
			break
		}
		if n < 4 { // flush, delimiter, response end
			n = 4
		}
		if uint64(len(p.buf)-i) < n {
			break
		}
		if pkt := p.buf[i : i+int(n)]; p.each(pkt) {
			out = append(out, pkt...)
		}
		i += int(n)
	}
	if p.raw {
		out = append(out, p.buf[i:]...)
		i = len(p.buf)
	}
	p.buf = append(p.buf[:0], p.buf[i:]...)
	if len(out) > 0 {
		if _, err := p.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// rest writes what is left of a partial pkt-line once the output ended.
func (p *pktWriter) rest() error {
	if len(p.buf) == 0 {
		return nil
	}
	_, err := p.w.Write(p.buf)
	p.buf = nil
	return err
}

// servedCapabilities are the lines of a protocol v2 capability
// advertisement that are passed on: the commands the Handler serves and
// the capabilities its checks allow. Others (object-info, bundle-uri, what
// a newer git adds) are refused when asked for, so they are not
// advertised either: a client that reads the capabilities does not try
// them. git 2.39 advertises object-info whatever transfer.advertiseObjectInfo
// says (the setting came in a later git).
var servedCapabilities = map[string]bool{"version 2": true, "agent": true, "ls-refs": true, "fetch": true,
	"server-option": true, "object-format": true, "session-id": true}

// servedCapability says whether one pkt-line of a v2 capability
// advertisement is passed on.
func servedCapability(pkt []byte) bool {
	if len(pkt) <= 4 {
		return true
	}
	name, _, _ := strings.Cut(strings.TrimSuffix(string(pkt[4:]), "\n"), "=")
	return servedCapabilities[name]
}
