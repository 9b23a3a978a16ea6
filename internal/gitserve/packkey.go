package gitserve

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// packKey names the answer to an upload-pack fetch request: two requests
// with one key get the same pack. It covers the repository (its directory
// and the state of its refs), the Git-Protocol header and the request body
// without what does not change the answer (the client's agent and session
// id, the framing of its lines).
func packKey(dir, gitProtocol string, state []byte, body []byte, v2 bool) (string, error) {
	pkts, err := pktLines(body)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "gitserve pack 1\x00%s\x00%s\x00%x\x00", dir, gitProtocol, state)
	for i, p := range pkts {
		if len(p) == 4 && p[:3] == "000" { // flush, delimiter, response end
			h.Write([]byte(p))
			continue
		}
		switch {
		case v2 && (strings.HasPrefix(p, "agent=") || strings.HasPrefix(p, "session-id=")):
			continue // a capability line before the arguments: upload-pack only logs it
		case !v2 && i == 0:
			p = dropTokens(p, "agent=", "session-id=") // v0 sends them after the first want
		}
		h.Write([]byte(pktLine(p + "\n")))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dropTokens removes the space-separated words of line that start with one
// of the prefixes.
func dropTokens(line string, prefixes ...string) string {
	words := strings.Split(line, " ")
	kept := words[:0]
	for _, w := range words {
		drop := false
		for _, p := range prefixes {
			drop = drop || strings.HasPrefix(w, p)
		}
		if !drop {
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " ")
}
