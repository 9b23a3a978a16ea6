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
// at /status on a loopback address while the node runs (the address is
// in <data>/status.addr), and written to <data>/status.json when it stops,
// so that a node the coordinator refused (revoked) still says why.

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

// checkLoopback refuses a status address that is not on loopback: the
// status is for the machine's own user.
func checkLoopback(addr string) error {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("node: status address %q: %w", addr, err)
	}
	if ip := net.ParseIP(h); h != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("node: status address %q is not on loopback (127.0.0.1 or ::1): the status is for this machine only", addr)
	}
	return nil
}

const (
	statusAddrFile = "status.addr"
	statusFile     = "status.json"
)

// serveStatus serves the node's status on its loopback address until ctx
// ends, with the address in <data>/status.addr meanwhile; then it writes
// the last status to <data>/status.json. ln is the listener, open already.
func (n *Node) serveStatus(ctx context.Context, ln net.Listener) {
	addrFile := filepath.Join(n.cfg.DataDir, statusAddrFile)
	if err := atomicfile.Write(addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
		n.log.Warn("status: could not write its address; gitfleet node status will not find the running node", "file", addrFile, "err", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		if ip := net.ParseIP(strings.Trim(hostOf(r.RemoteAddr), "[]")); ip == nil || !ip.IsLoopback() {
			http.Error(w, "this machine only", http.StatusForbidden)
			return
		}
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
	_ = os.Remove(addrFile)
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

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// ReadStatus reads the status of the node whose data directory is dataDir:
// from the running node, or, when none runs, the status it wrote when it
// stopped (Running false).
func ReadStatus(ctx context.Context, dataDir string) (Status, error) {
	var st Status
	addr, err := os.ReadFile(filepath.Join(dataDir, statusAddrFile))
	if err == nil {
		a := strings.TrimSpace(string(addr))
		if err := checkLoopback(a); err != nil {
			return st, err
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/status", nil)
		resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				return st, fmt.Errorf("node status at %s: %s: %s", a, resp.Status, strings.TrimSpace(string(b)))
			}
			if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
				return st, fmt.Errorf("node status at %s: %w", a, err)
			}
			return st, nil
		}
		// Not answering: a node that died without removing the file.
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
