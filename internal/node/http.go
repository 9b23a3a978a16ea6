package node

import (
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
)

func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{"publicError": api.PublicError}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>gitfleet mirror</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}.failing{color:#b00}</style>
</head><body><h1>gitfleet mirror</h1>
<p>{{.Total}} repositories{{if gt .Total (len .Repos)}} (the first {{len .Repos}} shown){{end}}.
JSON: <a href="/api/v1/repos">/api/v1/repos</a>, <a href="/api/v1/nodes">/api/v1/nodes</a>, <a href="/api/v1/openapi.json">OpenAPI</a>.</p>
{{with .Held}}<p class="failing">Held back by purge protection: {{.Summary}}. The full list: <a href="/api/v1/catalog">/api/v1/catalog</a>.</p>
{{end}}<table><tr><th>repository</th><th>clone URL</th><th>owner</th><th>state</th><th>current</th><th>last check</th><th>last error</th></tr>
{{range .Repos}}<tr class="{{.State}}"><td>{{.Key}}</td><td><code>{{.CloneURL}}</code></td><td>{{.Owner}}</td><td>{{.State}}</td><td>{{.Current}}</td><td>{{if .LastCheck}}{{.LastCheck.Format "2006-01-02 15:04:05"}}{{end}}</td><td>{{publicError .LastError}}</td></tr>
{{end}}</table></body></html>
`))

// statusPage is the mirror's page for people.
func (f *fullNode) statusPage(w http.ResponseWriter, r *http.Request) {
	repos, total := f.backend.ListRepos(api.RepoFilter{Limit: 1000})
	base := f.n.cfg.PublicURL
	if base == "" {
		base = "http://" + r.Host
	}
	for i := range repos {
		if repos[i].CloneURL == "" {
			repos[i].CloneURL = strings.TrimSuffix(base, "/") + "/" + repos[i].Key + ".git"
		}
	}
	var held *api.PendingPurge
	if cat, err := f.backend.Catalog(r.Context()); err == nil {
		held = cat.Pending
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusTmpl.Execute(w, struct {
		Repos []api.Repo
		Total int
		Held  *api.PendingPurge
	}{repos, total, held}); err != nil {
		f.n.log.Warn("status page", "err", err)
	}
}
