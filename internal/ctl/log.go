package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
)

// fetchLog prints one page of the fetch log, newest first: key's entries
// (all when key is ""), only the failed ones, since a time (RFC 3339, or a
// duration back from now), of one node.
func fetchLog(ctx context.Context, c *client, out *printer, key string, o options, now time.Time) error {
	q := url.Values{}
	if key != "" {
		q.Set("key", key)
	}
	if o.failed {
		q.Set("state", "failed")
	}
	if o.since != "" {
		since, err := time.Parse(time.RFC3339, o.since)
		if d, derr := time.ParseDuration(o.since); derr == nil && d > 0 {
			since, err = now.Add(-d), nil
		}
		if err != nil {
			return fmt.Errorf("%w: --since %q: want a time (2026-11-25T14:00:00Z) or a duration back from now (24h)", errUsage, o.since)
		}
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	if o.node != 0 {
		q.Set("node", strconv.FormatUint(uint64(o.node), 10))
	}
	if o.before != "" {
		q.Set("before", o.before)
	}
	var page api.LogPage
	data, err := c.getJSON(ctx, "/api/v1/log?"+q.Encode(), &page)
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	tw := out.table()
	fmt.Fprintln(tw, "TIME\tKEY\tKIND\tNODE\tRESULT\tTOOK\tREFS\tERROR")
	for _, e := range page.Entries {
		node := strconv.FormatUint(uint64(e.Node), 10)
		if e.From != 0 {
			node += "<" + strconv.FormatUint(uint64(e.From), 10)
		}
		refs := "-"
		if e.RefsChanged > 0 {
			refs = strconv.Itoa(e.RefsChanged)
			if len(e.Refs) > 0 {
				refs += " " + short(strings.Join(e.Refs, ","), 40)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%dms\t%s\t%s\n", when(&e.At), e.Key, e.Kind, node,
			e.Result, e.DurationMs, refs, short(e.Error, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		_, err = fmt.Fprintf(out.w, "more: --before %s\n", page.Next)
	}
	return err
}

// tasks lists the queued and running on-demand checks.
func tasks(ctx context.Context, c *client, out *printer) error {
	var list api.TaskList
	data, err := c.getJSON(ctx, "/api/v1/tasks", &list)
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	tw := out.table()
	fmt.Fprintln(tw, "TASK\tKEY\tSTATE\tCREATED")
	for _, t := range list.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Key, t.State, when(&t.Created))
	}
	return tw.Flush()
}

// cancel stops an on-demand check.
func cancel(ctx context.Context, c *client, out *printer, id string) error {
	_, data, err := c.call(ctx, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+"/cancel", nil)
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(data)
	}
	var t api.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	_, err = fmt.Fprintf(out.w, "%s: %s (task %s)\n", t.Key, t.State, t.ID)
	return err
}
