package node

import (
	"net/http"
	"time"
)

func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// mountConsole serves the operator's console (package console, fed by
// console.go): the overview at / and its pages under /-/, which no
// repository key can start with.
func (f *fullNode) mountConsole(mux *http.ServeMux) func(w http.ResponseWriter, r *http.Request) bool {
	mux.Handle("/-/", f.console)
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/" {
			return false
		}
		f.console.ServeHTTP(w, r)
		return true
	}
}
