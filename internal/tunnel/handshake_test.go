package tunnel

import (
	"errors"
	"strings"
	"testing"
)

func TestParseHello(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		wantID    uint32
		wantProof string
		wantErr   string
	}{
		{name: "valid hello", line: "GITFLEET-TUNNEL 1 7 a1b2C3", wantID: 7, wantProof: "a1b2C3"},
		{name: "largest node ID", line: "GITFLEET-TUNNEL 1 4294967295 00", wantID: 4294967295, wantProof: "00"},
		{name: "node ID over uint32", line: "GITFLEET-TUNNEL 1 4294967296 00", wantErr: "bad node ID"},
		{name: "negative node ID", line: "GITFLEET-TUNNEL 1 -1 00", wantErr: "bad node ID"},
		{name: "other version", line: "GITFLEET-TUNNEL 2 7 00", wantErr: "unsupported tunnel version \"2\""},
		{name: "other protocol", line: "GET / HTTP/1.1", wantErr: "not a tunnel hello"},
		{name: "missing proof", line: "GITFLEET-TUNNEL 1 7", wantErr: "not a tunnel hello"},
		{name: "empty proof", line: "GITFLEET-TUNNEL 1 7 ", wantErr: "empty proof"},
		{name: "proof not hex", line: "GITFLEET-TUNNEL 1 7 xyz", wantErr: "not a hex string"},
		{name: "extra field", line: "GITFLEET-TUNNEL 1 7 00 00", wantErr: "not a tunnel hello"},
		{name: "carriage return", line: "GITFLEET-TUNNEL 1 7 00\r", wantErr: "not a hex string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, proof, err := parseHello(tt.line)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseHello(%q) error = %v, want one containing %q", tt.line, err, tt.wantErr)
				}
				return
			}
			if err != nil || id != tt.wantID || proof != tt.wantProof {
				t.Fatalf("parseHello(%q) = %d, %q, %v; want %d, %q, nil", tt.line, id, proof, err, tt.wantID, tt.wantProof)
			}
		})
	}
}

func FuzzParseHello(f *testing.F) {
	f.Add("GITFLEET-TUNNEL 1 7 a1b2c3")
	f.Add("GITFLEET-TUNNEL 1 4294967295 " + strings.Repeat("f", 64))
	f.Add("GITFLEET-TUNNEL 2 7 00")
	f.Add("GET / HTTP/1.1")
	f.Fuzz(func(t *testing.T, line string) {
		id, proof, err := parseHello(line)
		if err != nil {
			return
		}
		// Whatever is accepted is what a client could have sent.
		again := strings.TrimSuffix(formatHello(id, proof), "\n")
		id2, proof2, err := parseHello(again)
		if err != nil || id2 != id || proof2 != proof {
			t.Fatalf("parseHello(%q) = %d, %q, but its formatted form %q parses as %d, %q, %v", line, id, proof, again, id2, proof2, err)
		}
	})
}

func TestReadLine(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		want     string
		wantErr  string
		leftOver string
	}{
		{name: "stops at the newline and leaves the rest unread", input: "OK\nyamux-bytes", want: "OK", leftOver: "yamux-bytes"},
		{name: "line of the maximum length", input: strings.Repeat("a", maxLineLen-1) + "\n", want: strings.Repeat("a", maxLineLen-1)},
		{name: "line over the maximum length", input: strings.Repeat("a", maxLineLen) + "\n", wantErr: "longer than 512 bytes"},
		{name: "connection closed mid-line", input: "GITFLEET", wantErr: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReader(tt.input)
			got, err := readLine(r)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("readLine error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("readLine = %q, %v; want %q", got, err, tt.want)
			}
			if rest := tt.input[len(tt.input)-r.Len():]; rest != tt.leftOver {
				t.Fatalf("left unread %q, want %q", rest, tt.leftOver)
			}
		})
	}
}

func TestReplyCarriesTheServersMessage(t *testing.T) {
	line := strings.TrimSuffix(formatErr(errors.New("node 7 not admitted:\nbad token")), "\n")
	err := parseReply(line)
	if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "node 7 not admitted: bad token") {
		t.Fatalf("parseReply(%q) = %v; want errRefused with the message on one line", line, err)
	}
	if err := parseReply("OK"); err != nil {
		t.Fatalf("parseReply(OK) = %v", err)
	}
	if err := parseReply("HTTP/1.1 400 Bad Request"); err == nil || errors.Is(err, errRefused) {
		t.Fatalf("parseReply of garbage = %v; want a protocol error, not a refusal", err)
	}
	long := formatErr(errors.New(strings.Repeat("x", 10*maxMessageLen)))
	if len(long) > maxLineLen {
		t.Fatalf("ERR line of %d bytes exceeds the %d-byte line limit", len(long), maxLineLen)
	}
}
