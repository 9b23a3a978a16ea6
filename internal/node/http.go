package node

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"
)

// repoView is one repository as the JSON API shows it.
type repoView struct {
	Key        string     `json:"key"`
	URL        string     `json:"upstream_url"`
	CloneURL   string     `json:"clone_url"`
	Owner      uint32     `json:"owner_node"`
	State      string     `json:"state"`
	Served     bool       `json:"served"`
	Current    bool       `json:"current"`
	LastCheck  *time.Time `json:"last_check,omitempty"`
	LastChange *time.Time `json:"last_change,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	Digest     string     `json:"digest,omitempty"`
}

func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

func (f *fullNode) snapshot(r *http.Request) []repoView {
	base := f.n.cfg.PublicURL
	if base == "" {
		base = "http://" + r.Host
	}
	f.mu.Lock()
	out := make([]repoView, 0, len(f.view))
	for k, st := range f.view {
		out = append(out, repoView{Key: k, URL: st.GetUrl(), Owner: st.GetOwner(), State: st.GetState(),
			LastCheck: msTime(st.GetLastCheckMs()), LastChange: msTime(st.GetLastChangeMs()),
			LastError: st.GetLastError(), Digest: st.GetDigest(), CloneURL: strings.TrimSuffix(base, "/") + "/" + k + ".git"})
	}
	f.mu.Unlock()
	for i := range out {
		d, ok := f.n.digest(out[i].Key)
		out[i].Served = ok && f.n.mirror.Has(out[i].Key)
		out[i].Current = out[i].Served && d == out[i].Digest && d != ""
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (f *fullNode) apiRepos(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{"repos": f.snapshot(r)})
}

var statusTmpl = template.Must(template.New("status").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>gitfleet mirror</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}.failing{color:#b00}</style>
</head><body><h1>gitfleet mirror</h1>
<p>{{len .}} repositories. JSON: <a href="/api/v1/repos">/api/v1/repos</a>.</p>
<table><tr><th>repository</th><th>clone URL</th><th>owner</th><th>state</th><th>current</th><th>last check</th><th>last error</th></tr>
{{range .}}<tr class="{{.State}}"><td>{{.Key}}</td><td><code>{{.CloneURL}}</code></td><td>{{.Owner}}</td><td>{{.State}}</td><td>{{.Current}}</td><td>{{if .LastCheck}}{{.LastCheck.Format "2006-01-02 15:04:05"}}{{end}}</td><td>{{.LastError}}</td></tr>
{{end}}</table></body></html>
`))

func (f *fullNode) statusPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusTmpl.Execute(w, f.snapshot(r)); err != nil {
		fmt.Fprintln(w, err)
	}
}
