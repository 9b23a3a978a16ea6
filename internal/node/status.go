package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/atomicfile"
	"github.com/gitfleet/gitfleet/internal/bandwidth"
	"github.com/gitfleet/gitfleet/internal/humanize"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// A node's status for its volunteer (gitfleet node status): served as JSON
// at /status on a Unix socket, <data>/status.sock with mode 0600, while the
// node runs, so that only the user the node runs as (and root) can ask
// it; and written to <data>/status.json when it stops, so that a node the
// coordinator refused (revoked) still says why.

// Status is what a node tells its volunteer of itself.
type Status struct {
	At      time.Time `json:"at"`
	Running bool      `json:"running"`
	NodeID  uint32    `json:"node_id"`
	Name    string    `json:"name"`
	Mode    string    `json:"mode"`
	Session bool      `json:"session"` // in session with the coordinator
	// What it holds: its mirrors on disk and their size, and the
	// repositories assigned to it.
	Mirrors     int    `json:"mirrors"`
	MirrorBytes uint64 `json:"mirror_bytes"`
	Assigned    int    `json:"assigned"`
	// Its share of the fleet: Assigned of FleetRepos, as the
	// coordinator's last assignment told the fleet's size (0: not told).
	FleetRepos uint32   `json:"fleet_repos"`
	Share      float64  `json:"share"`
	Today      Traffic  `json:"today"`
	Standing   Standing `json:"standing"`
	// The volunteer's settings, and whether the node rests now.
	ActiveHours   string    `json:"active_hours,omitempty"`
	Resting       bool      `json:"resting"`
	Opens         time.Time `json:"opens,omitzero"` // when its hours begin, while it rests
	DeclineUrgent bool      `json:"decline_urgent,omitempty"`
	MaxBandwidth  int64     `json:"max_bandwidth"` // bytes per second, 0: no cap
}

// Standing is what the fleet holds against a node: the full nodes' counts
// of the pulls in which it served tips its upstream never had and of its
// stale reports, and the coordinator's refusal of it (Revoked when it was
// revoked).
type Standing struct {
	Mismatches   uint64 `json:"mismatches"`
	StaleReports uint64 `json:"stale_reports"`
	Revoked      bool   `json:"revoked"`
	Refused      string `json:"refused,omitempty"`
}

// Status returns the node's status now.
func (n *Node) Status() Status {
	now := n.clk.Now()
	n.mu.Lock()
	st := Status{At: now, Running: true, NodeID: n.id, Name: n.cfg.Name, Mode: roleName(n.reg.Mode), Session: n.sess != nil,
		Mirrors: len(n.digests), Assigned: len(n.owned), Standing: n.standing}
	n.mu.Unlock()
	if size, err := mirror.TreeSize(n.mirror.Root()); err == nil {
		st.MirrorBytes = uint64(size)
	}
	st.FleetRepos = n.fleetRepos.Load()
	if st.FleetRepos > 0 {
		st.Share = float64(st.Assigned) / float64(st.FleetRepos)
	}
	st.Today = n.traffic.get()
	st.ActiveHours, st.DeclineUrgent, st.MaxBandwidth = n.cfg.ActiveHours.String(), n.cfg.DeclineUrgent, int64(n.cfg.MaxBandwidth)
	if st.Resting = n.resting(); st.Resting {
		st.Opens = n.cfg.ActiveHours.Opens(now)
	}
	return st
}

const (
	statusSocketFile = "status.sock"
	statusFile       = "status.json"
	// maxSocketPath is the longest path a Unix socket's address takes
	// (sun_path: 108 bytes with its NUL on Linux, 104 on the BSDs).
	maxSocketPath = 103
)

// listenStatus opens the status socket, <dataDir>/status.sock with mode
// 0600. The socket is made under a name of its own, given its mode, and
// only then renamed into place (over a dead node's): at no time does
// status.sock answer another user.
func listenStatus(dataDir string) (net.Listener, error) {
	path := filepath.Join(dataDir, statusSocketFile)
	name := fmt.Sprintf(".status.%d.sock", os.Getpid())
	tmp := filepath.Join(dataDir, name)
	_ = os.Remove(tmp) // a node of this pid that died before its rename
	addr, release, err := socketAddr(dataDir, name)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", addr)
	release()
	if err != nil {
		return nil, fmt.Errorf("node: status socket: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // serveStatus removes status.sock itself
	err = os.Chmod(tmp, 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("node: status socket: %w", err)
	}
	return ln, nil
}

// socketAddr is the address of the Unix socket name in dir: its path, or,
// when that is longer than a socket's address takes, the same file
// through a descriptor of dir (/proc/self/fd/N/name, on Linux), valid until
// release.
func socketAddr(dir, name string) (addr string, release func(), err error) {
	path := filepath.Join(dir, name)
	if len(path) <= maxSocketPath {
		return path, func() {}, nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return "", nil, fmt.Errorf("node: status socket %s: %w", path, err)
	}
	addr = fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name)
	if _, err := os.Stat(filepath.Dir(addr)); err != nil {
		d.Close()
		return "", nil, fmt.Errorf("node: status socket %s: a path of %d bytes, over the %d a Unix socket takes: give --data a shorter path", path, len(path), maxSocketPath)
	}
	return addr, func() { d.Close() }, nil
}

// serveStatus serves the node's status on ln, its status socket, until ctx
// ends; then it removes the socket.
func (n *Node) serveStatus(ctx context.Context, ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(n.Status())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Warn("status: stopped serving", "err", err)
		}
	}()
	<-ctx.Done()
	_ = srv.Close()
	<-done
	_ = os.Remove(filepath.Join(n.cfg.DataDir, statusSocketFile))
}

// writeLastStatus writes the node's status to <data>/status.json, for
// gitfleet node status once the node has stopped.
func (n *Node) writeLastStatus() {
	st := n.Status()
	st.Running, st.Session = false, false
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := atomicfile.Write(filepath.Join(n.cfg.DataDir, statusFile), append(b, '\n'), 0o644); err != nil {
		n.log.Warn("status: could not write the last status", "err", err)
	}
}

// ReadStatus reads the status of the node whose data directory is dataDir:
// from the running node, or, when none runs, the status it wrote when it
// stopped (Running false).
func ReadStatus(ctx context.Context, dataDir string) (Status, error) {
	var st Status
	sock := filepath.Join(dataDir, statusSocketFile)
	if _, err := os.Stat(sock); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		tr := &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			addr, release, err := socketAddr(dataDir, statusSocketFile)
			if err != nil {
				return nil, err
			}
			defer release()
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://node/status", nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				return st, fmt.Errorf("node status at %s: %s: %s", sock, resp.Status, strings.TrimSpace(string(b)))
			}
			if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
				return st, fmt.Errorf("node status at %s: %w", sock, err)
			}
			return st, nil
		}
		if errors.Is(err, os.ErrPermission) {
			return st, fmt.Errorf("node status at %s: %w: run gitfleet node status as the user the node runs as", sock, err)
		}
		// Not answering: a node that died without removing its socket.
	}
	b, err := os.ReadFile(filepath.Join(dataDir, statusFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("no node runs on %s, and none has run there (no %s): check --data", dataDir, statusFile)
	}
	if err != nil {
		return st, fmt.Errorf("node status: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("node status: %s: %w", filepath.Join(dataDir, statusFile), err)
	}
	st.Running = false
	return st, nil
}

// Write writes st for people.
func (st Status) Write(w io.Writer) {
	state := "running"
	switch {
	case !st.Running:
		state = "not running (as it stopped, " + st.At.Local().Format(time.DateTime) + ")"
	case st.Session:
		state += ", in session with the coordinator"
	default:
		state += ", not in session with the coordinator"
	}
	fmt.Fprintf(w, "node %d %q (%s): %s\n", st.NodeID, st.Name, st.Mode, state)
	fmt.Fprintf(w, "holds:     %d mirrors, %s on disk\n", st.Mirrors, humanize.Bytes(st.MirrorBytes))
	if st.FleetRepos > 0 {
		fmt.Fprintf(w, "share:     %d of the fleet's %d repositories (%.1f%%)\n", st.Assigned, st.FleetRepos, 100*st.Share)
	} else {
		fmt.Fprintf(w, "share:     %d repositories assigned (the fleet's size not told yet)\n", st.Assigned)
	}
	fmt.Fprintf(w, "today:     %s down, %s up (%s)\n", humanize.Bytes(st.Today.Down), humanize.Bytes(st.Today.Up), st.Today.Day)
	standing := fmt.Sprintf("%d mismatches, %d stale reports", st.Standing.Mismatches, st.Standing.StaleReports)
	switch {
	case st.Standing.Revoked:
		standing += ", REVOKED: " + st.Standing.Refused
	case st.Standing.Refused != "":
		standing += ", refused by the coordinator: " + st.Standing.Refused
	default:
		standing += ", not revoked"
	}
	fmt.Fprintf(w, "standing:  %s\n", standing)
	hours := "always active"
	if st.ActiveHours != "" {
		hours = st.ActiveHours + ", active now"
		if st.Resting {
			hours = st.ActiveHours + ", resting until " + st.Opens.Local().Format(time.DateTime)
		}
		if st.DeclineUrgent {
			hours += "; urgent checks wait for them too"
		} else {
			hours += "; urgent checks run at any hour"
		}
	}
	fmt.Fprintf(w, "hours:     %s\n", hours)
	fmt.Fprintf(w, "bandwidth: %s\n", capText(bandwidth.Rate(st.MaxBandwidth)))
}

func capText(r bandwidth.Rate) string {
	if r <= 0 {
		return "no cap"
	}
	return "capped at " + r.String() + ", downloads and uploads together"
}
