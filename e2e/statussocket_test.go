package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/node"
)

// TestANodesStatusAnswersOnlyOnItsSocket: a running partial node serves
// its status on <data>/status.sock, a socket of mode 0600 that only its
// user may open, and gitfleet node status reads it there; none of the
// TCP ports the node listens on (its egress proxy's, on loopback) answers
// with its status, as the old status listener did to any local user.
func TestANodesStatusAnswersOnlyOnItsSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	f.seed(seq(0, 1), "one repository")
	f.startCoordinator()
	f.startNode("volunteer", "partial")
	dir := f.dataDir("volunteer")

	var st node.Status
	eventually(t, 60*time.Second, "gitfleet node status says the node runs, in session", func() error {
		out, err := runBinary(t, "node", "status", "--data", dir, "--json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if !st.Running || !st.Session || st.Name != "volunteer" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	fi, err := os.Stat(filepath.Join(dir, "status.sock"))
	if err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the status socket: %v, %v; want a socket of mode 0600", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "status.addr")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("status.addr: %v; want none, no TCP address to find", err)
	}
	ports, err := listeningPorts(f.procs["volunteer"].cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	for _, port := range ports {
		resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/status")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"node_id"`) {
			t.Errorf("port %d of the node answers its status to anyone on the machine: %s", port, b)
		}
	}
}

// listeningPorts are the TCP ports process pid listens on: its sockets'
// inodes (/proc/PID/fd) found listening in /proc/net/tcp and tcp6.
func listeningPorts(pid int) ([]int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		file, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(file)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
				ports = append(ports, int(p))
			}
		}
		file.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}
