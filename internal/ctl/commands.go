package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/humanize"
)

// printer writes either for people or, with json, the server's JSON.
type printer struct {
	w    io.Writer
	json bool
}

// raw prints the server's JSON as it came.
func (p *printer) raw(data []byte) error {
	_, err := fmt.Fprintln(p.w, strings.TrimRight(string(data), "\n"))
	return err
}

func (p *printer) table() *tabwriter.Writer { return tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0) }

func repos(ctx context.Context, c *client, out *printer, o options) error {
	q := url.Values{}
	for name, v := range map[string]string{"state": o.state, "prefix": o.prefix, "network": o.network} {
		if v != "" {
			q.Set(name, v)
		}
	}
	for name, v := range map[string]int{"owner": int(o.owner), "offset": o.offset, "limit": o.limit} {
		if v != 0 {
			q.Set(name, strconv.Itoa(v))
		}
	}
	var list struct {
		Repos                []api.Repo
		Total, Offset, Limit int
	}
	data, err := c.getJSON(ctx, "/api/v1/repos?"+q.Encode(), &list)
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	tw := out.table()
	fmt.Fprintln(tw, "KEY\tSTATE\tOWNER\tSERVED\tLAST CHECK\tVERIFIED\tSTALENESS\tLAST ERROR")
	for _, r := range list.Repos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Key, r.State, owner(r.Owner), served(r), when(r.LastCheck),
			when(r.VerifiedAt), staleness(r), short(firstLine(r.LastError), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list.Repos) < list.Total {
		_, err = fmt.Fprintf(out.w, "%d to %d of %d (--offset and --limit for more)\n", list.Offset+1, list.Offset+len(list.Repos), list.Total)
	}
	return err
}

// owner is a node ID, or "-" for a repository that no node holds yet.
func owner(id uint32) string {
	if id == 0 {
		return "-"
	}
	return strconv.FormatUint(uint64(id), 10)
}

// firstLine is the first non-empty line of a (git) error, which may run
// over several lines.
func firstLine(s string) string {
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// indented writes the lines of a multi-line value under its first, so
// that a long git error does not break the table.
func indented(s string) string {
	var b strings.Builder
	for l := range strings.Lines(strings.TrimSpace(s)) {
		if l = strings.TrimRight(l, " \t\r\n"); strings.TrimSpace(l) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\t")
		}
		b.WriteString(strings.TrimSpace(l))
	}
	return b.String()
}

// ownerOrNone is ctl show's owner: as the console says it.
func ownerOrNone(id uint32) string {
	if id == 0 {
		return "none yet"
	}
	return owner(id)
}

func served(r api.Repo) string {
	switch {
	case !r.Served:
		return "no"
	case r.Current:
		return "current"
	default:
		return "behind"
	}
}

func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// staleness is the time since the full node verified r against its
// upstream ("-": never).
func staleness(r api.Repo) string {
	if r.VerifiedAt == nil {
		return "-"
	}
	return seconds(r.StalenessSeconds)
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

func show(ctx context.Context, c *client, out *printer, key string) error {
	var d api.RepoDetail
	data, err := c.getJSON(ctx, repoPath(key), &d)
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	tw := out.table()
	for _, kv := range [][2]string{
		{"key", d.Key}, {"upstream", d.UpstreamURL}, {"clone", d.CloneURL}, {"owner", ownerOrNone(d.Owner)},
		{"network", network(d.Repo)}, {"replicas", replicas(d.Replicas)}, {"state", d.State.String()}, {"served", served(d.Repo)}, {"last check", when(d.LastCheck)}, {"last change", when(d.LastChange)},
		{"verified", when(d.VerifiedAt)}, {"staleness", staleness(d.Repo)}, {"last error", indented(d.LastError)}, {"digest", d.Digest},
	} {
		if kv[1] != "" && kv[1] != "-" {
			fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
		}
	}
	// A line without a tab ends a block of aligned columns: each section
	// is aligned on its own.
	for _, sec := range []struct {
		name string
		m    map[string]string
	}{{"attributes", d.Attrs}, {"refs", d.Refs}} {
		if len(sec.m) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s:\n", sec.name)
		for _, k := range slices.Sorted(maps.Keys(sec.m)) {
			fmt.Fprintf(tw, "  %s\t%s\n", k, sec.m[k])
		}
	}
	if len(d.History) > 0 {
		fmt.Fprintln(tw, "history:")
		for _, h := range d.History {
			what := h.Kind
			if h.Result == "cancelled" {
				what += ", cancelled"
			}
			if h.Changed {
				what += ", changed"
			}
			if h.RefsChanged > 0 {
				what += fmt.Sprintf(" (%d refs)", h.RefsChanged)
			}
			// The error's class, then its first line: the whole text is
			// the last error's, above, or the log's (ctl log).
			switch first := firstLine(h.Error); {
			case h.ErrorClass != "" && first != "" && !strings.Contains(strings.ToLower(first), strings.ToLower(h.ErrorClass)):
				what += ": " + h.ErrorClass + ": " + first
			case first != "":
				what += ": " + first
			case h.ErrorClass != "":
				what += ": " + h.ErrorClass
			}
			if h.DurationMs > 0 {
				what += fmt.Sprintf(" (%dms)", h.DurationMs)
			}
			fmt.Fprintf(tw, "  %s\t%s\n", h.At.UTC().Format("2006-01-02 15:04:05"), what)
		}
	}
	return tw.Flush()
}

func add(ctx context.Context, c *client, out *printer, rawURL string, attrArgs []string) error {
	var attrs map[string]string
	for _, a := range attrArgs {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return fmt.Errorf("%w: attribute %q: want name=value", errUsage, a)
		}
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[k] = v
	}
	status, data, err := c.call(ctx, http.MethodPost, "/api/v1/repos", map[string]any{"url": rawURL, "attrs": attrs})
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	var r api.Repo
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	verb := "updated"
	if status == http.StatusCreated {
		verb = "added"
	}
	_, err = fmt.Fprintf(out.w, "%s %s\nclone URL: %s\n", verb, r.Key, r.CloneURL)
	return err
}

func remove(ctx context.Context, c *client, out *printer, key string) error {
	if _, _, err := c.call(ctx, http.MethodDelete, repoPath(key), nil); err != nil {
		return err
	}
	if out.json {
		data, _ := json.Marshal(map[string]string{"removed": key})
		return out.raw(data)
	}
	_, err := fmt.Fprintf(out.w, "removed %s\n", key)
	return err
}

// fetch requests a check; with wait it follows the task to its end,
// printing each change of state, and fails if the check failed.
func fetch(ctx context.Context, c *client, out *printer, key string, wait bool) error {
	_, data, err := c.call(ctx, http.MethodPost, repoPath(key)+"/fetch", nil)
	if err != nil {
		return err
	}
	var t api.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	if !wait {
		if out.json {
			return out.raw(data)
		}
		_, err := fmt.Fprintf(out.w, "%s: %s (task %s)\n", key, t.State, t.ID)
		return err
	}
	if !out.json {
		fmt.Fprintf(out.w, "%s: %s (task %s)\n", key, t.State, t.ID)
	}
	// Short polls show the progress; a script only needs the end.
	poll := "1s"
	if out.json {
		poll = "60s"
	}
	for last := t.State; !t.Final(); last = t.State {
		if data, err = c.getJSON(ctx, "/api/v1/tasks/"+url.PathEscape(t.ID)+"?wait="+poll, &t); err != nil {
			return err
		}
		if t.State != last && !t.Final() && !out.json {
			fmt.Fprintf(out.w, "%s: %s\n", key, t.State)
		}
	}
	if out.json {
		if err := out.raw(data); err != nil {
			return err
		}
	} else {
		printResult(out.w, key, t)
	}
	switch t.State {
	case api.TaskFailed:
		return fmt.Errorf("the check of %s failed: %s", key, t.Error)
	case api.TaskCancelled:
		return fmt.Errorf("the check of %s was cancelled", key)
	}
	return nil
}

func printResult(w io.Writer, key string, t api.Task) {
	took := (time.Duration(t.DurationMs) * time.Millisecond).String()
	if t.State == api.TaskFailed || t.State == api.TaskCancelled {
		fmt.Fprintf(w, "%s: %s after %s\n", key, t.State, took)
		return
	}
	changes := refChanges(t.OldRefs, t.NewRefs)
	switch len(changes) {
	case 0:
		fmt.Fprintf(w, "%s: done in %s, no change\n", key, took)
	case 1:
		fmt.Fprintf(w, "%s: done in %s, 1 ref changed\n", key, took)
	default:
		fmt.Fprintf(w, "%s: done in %s, %d refs changed\n", key, took, len(changes))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ch := range changes {
		fmt.Fprintf(tw, "  %s\t%s\n", ch[0], ch[1])
	}
	tw.Flush()
}

// refChanges lists the refs that differ, sorted, with what happened.
func refChanges(old, new map[string]string) [][2]string {
	var out [][2]string
	for ref, o := range old {
		if n, ok := new[ref]; !ok {
			out = append(out, [2]string{ref, "deleted (was " + abbrev(o) + ")"})
		} else if n != o {
			out = append(out, [2]string{ref, abbrev(o) + ".." + abbrev(n)})
		}
	}
	for ref, n := range new {
		if _, ok := old[ref]; !ok {
			out = append(out, [2]string{ref, "new " + abbrev(n)})
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out
}

func abbrev(id string) string { return id[:min(len(id), 10)] }

func nodes(ctx context.Context, c *client, out *printer) error {
	var list struct{ Nodes []api.Node }
	data, err := c.getJSON(ctx, "/api/v1/nodes", &list)
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	tw := out.table()
	fmt.Fprintln(tw, "ID\tNAME\tMODE\tSTATE\tLAST HEARTBEAT\tREPOS\tDISK\tFLAPPING\tSTALE REPORTS")
	for _, n := range list.Nodes {
		disk := "-"
		if n.DiskTotal > 0 {
			disk = humanize.Bytes(n.DiskUsed) + " / " + humanize.Bytes(n.DiskTotal)
		}
		flap := "no"
		if n.Flapping {
			flap = fmt.Sprintf("yes (%d changes)", len(n.History))
		}
		state := n.State
		if n.RevokedReason != "" {
			state += ": " + short(n.RevokedReason, 40)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\n", n.ID, n.Name, n.Mode, state, when(&n.LastHeartbeat), n.Repos, disk, flap,
			n.StaleReports)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A held catalog change is the fleet's business too: name it here.
	var st api.CatalogStatus
	if _, err := c.getJSON(ctx, "/api/v1/catalog", &st); err == nil {
		printHeld(out, st.Pending)
	}
	return nil
}

// reconnectDelay is the pause before the event stream is opened again.
const reconnectDelay = time.Second

// events follows the event stream, one line per event, until ctx ends.
// When the stream breaks after it was open, it reconnects and resumes
// after the last event it printed.
func events(ctx context.Context, c *client, out *printer, stderr io.Writer) error {
	var last string
	opened := false
	for {
		err := c.stream(ctx, last, func() { opened = true }, func(id, data string) error {
			last = id
			return out.event(data)
		})
		var ae *apiError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &ae), !opened:
			return err
		}
		fmt.Fprintf(stderr, "gitfleet ctl: event stream interrupted (%v); reconnecting\n", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(reconnectDelay):
		}
	}
}

// stream reads the event stream from after lastID, calling onEvent with
// each message's id and data; it returns when the stream ends.
func (c *client) stream(ctx context.Context, lastID string, onOpen func(), onEvent func(id, data string) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v1/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the server: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return answerError(resp.StatusCode, data)
	}
	onOpen()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				if err := onEvent(id, data); err != nil {
					return err
				}
			}
			data = ""
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			if data != "" {
				data += "\n"
			}
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream: %w", err)
	}
	return errors.New("the server ended the event stream")
}

// event prints one event: its JSON, or a line for people.
func (p *printer) event(data string) error {
	if p.json {
		_, err := fmt.Fprintln(p.w, data)
		return err
	}
	var ev api.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return fmt.Errorf("event stream: bad event %q: %w", short(data, 80), err)
	}
	change := abbrev(ev.Old) + ".." + abbrev(ev.New)
	switch {
	case ev.Old == api.ZeroID:
		change = "new " + abbrev(ev.New)
	case ev.New == api.ZeroID:
		change = "deleted (was " + abbrev(ev.Old) + ")"
	}
	_, err := fmt.Fprintf(p.w, "%s  %s  %s  %s\n", ev.Time.UTC().Format(time.RFC3339), ev.Key, ev.Ref, change)
	return err
}

func catalogStatus(ctx context.Context, c *client, out *printer) error {
	var st api.CatalogStatus
	data, err := c.getJSON(ctx, "/api/v1/catalog", &st)
	if err != nil {
		return err
	}
	unreadable := errCatalogUnreadable(st)
	if out.json {
		if err := out.raw(data); err != nil {
			return err
		}
		return unreadable
	}
	commit := st.Commit
	if commit == "" {
		commit = "none yet"
	}
	fmt.Fprintf(out.w, "commit %s: %d repositories, %d entries skipped\n", commit, st.Repos, st.Problems)
	printHeld(out, st.Pending)
	return unreadable
}

// errCatalogUnreadable is the error of a catalog that cannot be read (ctl
// catalog then exits non-zero), nil for one that can.
func errCatalogUnreadable(st api.CatalogStatus) error {
	if st.Error == "" {
		return nil
	}
	since := ""
	if st.ErrorAt != nil {
		since = " since " + st.ErrorAt.UTC().Format(time.RFC3339)
	}
	keeps := "no repositories until it can"
	if st.Commit != "" {
		keeps = "the last good commit stays applied"
	}
	return fmt.Errorf("the catalog cannot be read%s (%s): %s", since, keeps, st.Error)
}

// printHeld names a held catalog change (nothing when p is nil): the count
// and the first keys; --json lists the first 1,000.
func printHeld(out *printer, p *api.PendingPurge) {
	if p != nil {
		fmt.Fprintf(out.w, "HELD BACK: %s; run `gitfleet ctl confirm-purge` to apply it\n", p.Summary())
	}
}

func confirmPurge(ctx context.Context, c *client, out *printer) error {
	_, data, err := c.call(ctx, http.MethodPost, "/api/v1/catalog/confirm-purge", nil)
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	var r struct{ Message string }
	_ = json.Unmarshal(data, &r)
	fmt.Fprintln(out.w, r.Message)
	return nil
}

// replicas lists the full nodes that are to hold a repository.
func replicas(ids []uint32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ", ")
}

// network is a repository's fork network as show prints it: its name, and
// the parts it is split into when it is.
func network(r api.Repo) string {
	if r.NetworkParts > 1 {
		return fmt.Sprintf("%s (split over %d nodes)", r.Network, r.NetworkParts)
	}
	return r.Network
}
