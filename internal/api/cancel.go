package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/gitfleet/gitfleet/internal/repostate"
)

// cancelledText is the error of a cancelled task.
const cancelledText = "cancelled by the operator"

// Active returns the queued and running tasks, newest first, at most limit.
func (t *Tasks) Active(limit int) []Task {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clk.Now()
	var out []Task
	for _, tks := range t.active {
		for _, tk := range slices.Backward(tks) { // a key's newest first
			t.expireLocked(tk, now)
			if !tk.Final() {
				out = append(out, tk.Task)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Task) int { return b.Created.Compare(a.Created) })
	return out[:min(len(out), limit)]
}

// maxTaskList is the most tasks GET /api/v1/tasks lists.
const maxTaskList = 1000

// TaskList is the body of GET /api/v1/tasks.
type TaskList struct {
	Tasks []Task `json:"tasks"`
}

// listTasks serves GET /api/v1/tasks: the queued and running checks.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	limit := maxTaskList
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxTaskList {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to %d", l, maxTaskList))
			return
		}
		limit = n
	}
	ts := s.tasks.Active(limit)
	if ts == nil {
		ts = []Task{}
	}
	if !s.operator(r) {
		for i := range ts {
			ts[i] = publicTask(ts[i])
		}
	}
	writeJSON(w, http.StatusOK, TaskList{Tasks: ts})
}

// cancelTask serves POST /api/v1/tasks/{id}/cancel: a queued or running
// check stops, and its task ends as cancelled.
func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	t, found := s.tasks.Get(id)
	switch {
	case !found:
		writeError(w, http.StatusNotFound, "no such task (finished tasks are kept for a while only)")
		return
	case t.Final():
		writeError(w, http.StatusConflict, fmt.Sprintf("task %s has ended already (%s)", id, t.State))
		return
	}
	// A queued task may be on its way to the owner: tell it too.
	if err := s.fleet.Checks.CancelFetch(r.Context(), t.Key, id); err != nil && t.State == TaskRunning {
		s.log.Warn("api: cannot cancel a check", "key", t.Key, "task", id, "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot reach the check to stop it: "+s.detail(r, err))
		return
	}
	s.tasks.Finish(id, TaskResult{Err: cancelledText, Class: repostate.ClassCancelled, Cancelled: true})
	s.log.Info("api: on-demand check cancelled", "key", t.Key, "task", id)
	if t, _ = s.tasks.Get(id); t.State != TaskCancelled {
		// It ended by itself meanwhile: say how.
		writeError(w, http.StatusConflict, fmt.Sprintf("task %s has ended already (%s)", id, t.State))
		return
	}
	writeJSON(w, http.StatusOK, t)
}
