package tunnel

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The handshake runs on the raw connection before yamux starts, so that a
// node is authenticated before it gets a session:
//
//	client: GITFLEET-TUNNEL 1 <nodeID> <proof>\n
//	server: OK\n   or   ERR <message>\n (and closes)
const (
	helloMagic   = "GITFLEET-TUNNEL"
	helloVersion = "1"
	// maxLineLen bounds a handshake line, newline included, so that an
	// unauthenticated peer cannot make the server buffer without limit.
	maxLineLen = 512
	// maxMessageLen bounds the message of an ERR line.
	maxMessageLen = 200
)

// errRefused marks a handshake that the server answered with ERR.
var errRefused = errors.New("tunnel refused by the full node")

func formatHello(nodeID uint32, proof string) string {
	return fmt.Sprintf("%s %s %d %s\n", helloMagic, helloVersion, nodeID, proof)
}

// parseHello parses a client's hello line (without its newline).
func parseHello(line string) (nodeID uint32, proof string, err error) {
	f := strings.Split(line, " ")
	if len(f) != 4 || f[0] != helloMagic {
		return 0, "", fmt.Errorf("not a tunnel hello: want %q", helloMagic+" "+helloVersion+" <nodeID> <proof>")
	}
	if f[1] != helloVersion {
		return 0, "", fmt.Errorf("unsupported tunnel version %q, this full node speaks %s", f[1], helloVersion)
	}
	id, err := strconv.ParseUint(f[2], 10, 32)
	if err != nil {
		return 0, "", fmt.Errorf("bad node ID %q: want a decimal uint32", f[2])
	}
	if err := checkProof(f[3]); err != nil {
		return 0, "", err
	}
	return uint32(id), f[3], nil
}

// checkProof accepts a non-empty hex string that fits in a hello line.
func checkProof(proof string) error {
	if proof == "" {
		return errors.New("empty proof")
	}
	if len(formatHello(^uint32(0), proof)) > maxLineLen {
		return fmt.Errorf("proof of %d characters is too long for a %d-byte hello line", len(proof), maxLineLen)
	}
	for _, c := range proof {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return errors.New("proof is not a hex string")
		}
	}
	return nil
}

// formatErr builds an ERR line that stays one bounded line whatever the
// error says.
func formatErr(err error) string {
	msg := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, err.Error())
	if len(msg) > maxMessageLen {
		msg = strings.ToValidUTF8(msg[:maxMessageLen], "")
	}
	return "ERR " + msg + "\n"
}

// parseReply turns the server's reply line into nil (OK) or an error that
// wraps errRefused and carries the server's message.
func parseReply(line string) error {
	if line == "OK" {
		return nil
	}
	if msg, ok := strings.CutPrefix(line, "ERR "); ok {
		return fmt.Errorf("%w: %s", errRefused, msg)
	}
	return fmt.Errorf("unexpected handshake reply %q", line)
}

// readLine reads one '\n'-terminated line of at most maxLineLen bytes and
// returns it without the newline. It reads a byte at a time on purpose:
// the bytes after the line belong to yamux and must stay in the connection.
func readLine(r io.Reader) (string, error) {
	var buf [maxLineLen]byte
	for n := 0; n < len(buf); n++ {
		if _, err := io.ReadFull(r, buf[n:n+1]); err != nil {
			return "", fmt.Errorf("read handshake line: %w", err)
		}
		if buf[n] == '\n' {
			return string(buf[:n]), nil
		}
	}
	return "", fmt.Errorf("handshake line longer than %d bytes", maxLineLen)
}
