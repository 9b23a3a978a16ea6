package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// hookHost is a kind of forge whose webhooks the full node takes, at
// /hooks/<name>: what its deliveries look like, and how they are checked,
// identified and read, is its row of forge's table.
type hookHost struct {
	name string // the kind
	hook *forge.Webhook
}

// hosts are the kinds of forge that have a webhook, in the table's order.
var hosts = func() []hookHost {
	var out []hookHost
	for _, k := range forge.Kinds() {
		if w := forge.WebhookOf(k); w != nil {
			out = append(out, hookHost{name: string(k), hook: w})
		}
	}
	return out
}()

// hookResponse is the answer to a webhook delivery.
type hookResponse struct {
	Key     string `json:"key,omitempty"`
	Task    *Task  `json:"task,omitempty"`
	Added   bool   `json:"added,omitempty"`
	Ignored string `json:"ignored,omitempty"`
}

func (s *Server) hookSecret(host string) string {
	if v := s.cfg.WebhookSecrets[host]; v != "" {
		return v
	}
	return s.cfg.WebhookSecrets[""]
}

// hookHandler authenticates a delivery, finds its repository and requests
// a check in the background: it answers at once.
func (s *Server) hookHandler(h hookHost) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secret := s.hookSecret(h.name)
		if secret == "" {
			writeError(w, http.StatusForbidden, "webhook secret not configured")
			return
		}
		if !h.hook.SignsBody() {
			if err := h.hook.Verify(r.Header, secret, nil, s.clk.Now()); err != nil {
				writeError(w, http.StatusUnauthorized, err.Error())
				return
			}
		}
		body, ok := readBody(w, r, s.maxBody(defaultMaxHookBody))
		if !ok {
			return
		}
		if h.hook.SignsBody() {
			if err := h.hook.Verify(r.Header, secret, body, s.clk.Now()); err != nil {
				writeError(w, http.StatusUnauthorized, err.Error())
				return
			}
		}
		event := r.Header.Get(h.hook.EventHeader)
		switch {
		case event == "":
			writeError(w, http.StatusBadRequest, "missing "+h.hook.EventHeader+" header")
			return
		case h.hook.PingEvent != "" && event == h.hook.PingEvent:
			writeJSON(w, http.StatusOK, map[string]string{"ping": "ok"})
			return
		case !h.hook.IsRefEvent(event):
			writeJSON(w, http.StatusOK, hookResponse{Ignored: fmt.Sprintf("event %q does not change refs", event)})
			return
		}
		p, err := h.hook.Parse(r.Header.Get("Content-Type"), body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		cands := candidates(p.Repos, s.keyOptions())
		if len(cands) == 0 {
			writeError(w, http.StatusBadRequest, "no usable repository URL in the payload")
			return
		}
		// A replay that changes the delivery header is not caught here (a
		// GitHub signature does not cover it); the pacing of each
		// repository and the rate of each host bound what it costs.
		c := deliveryClaim(h.name, h.hook, r, body)
		switch s.delivered.check(c) {
		case replayed:
			writeJSON(w, http.StatusOK, hookResponse{Key: cands[0].key.String(), Ignored: "this delivery was already acted on"})
			return
		case reused:
			// 409, not 401: the signature is right, but it was spent on
			// another delivery; 401 would send the operator looking at a
			// secret that is fine.
			writeCodedError(w, http.StatusConflict, "signature_reused",
				h.hook.TimestampHeader+" and its signature came with another delivery before: a signature is used once")
			return
		}
		if key, ok := s.knownKey(cands); ok {
			t, err := s.requestPaced(key, func() {
				if s.fleet.Hints == nil {
					return
				}
				// Heard before the check starts, so that the owner's answer
				// is weighed against it; and only for a check that was let in.
				if err := s.fleet.Hints.ChangeHint(r.Context(), key, s.clk.Now()); err != nil {
					s.log.Warn("webhook: change hint not recorded", "host", h.name, "key", key, "err", err)
				}
			})
			if err != nil {
				s.delivered.forget(c) // the host's retry is acted on
				writeHostBusy(w, err)
				return
			}
			s.log.Debug("webhook: check requested", "host", h.name, "key", key, "ref", p.Ref, "pushed_at", p.PushedAt, "task", t.ID)
			pt := publicTask(t)
			writeJSON(w, http.StatusAccepted, hookResponse{Key: key.String(), Task: &pt})
			return
		}
		first := cands[0]
		if !s.cfg.AutoAdd || !h.hook.AutoAdd {
			msg := repostate.NotMirrored(first.key.String())
			if s.cfg.AutoAdd {
				msg += " (not auto-added from " + h.name + ": its signature does not cover the payload)"
			}
			writeCodedError(w, http.StatusNotFound, "not_mirrored", msg)
			return
		}
		add, err := s.autoAdded(h, p, cands)
		if err != nil {
			s.log.Info("webhook: repository not auto-added", "host", h.name, "key", first.key, "err", err)
			writeCodedError(w, http.StatusNotFound, "not_mirrored", repostate.NotMirrored(first.key.String())+" (not auto-added: "+err.Error()+")")
			return
		}
		if err := s.admitHost(add.key, s.clk.Now()); err != nil {
			s.delivered.forget(c)
			writeHostBusy(w, err)
			return
		}
		s.background(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, startTimeout)
			defer cancel()
			if _, err := s.fleet.Catalog.AddRepo(ctx, add.url, nil, false); err != nil {
				s.log.Warn("webhook: cannot auto-add a repository", "host", h.name, "key", add.key, "err", err)
				return
			}
			s.log.Info("webhook: repository auto-added", "host", h.name, "key", add.key)
		})
		writeJSON(w, http.StatusAccepted, hookResponse{Key: add.key.String(), Added: true})
	}
}

// autoAdded is the repository that a delivery to h's endpoint may add:
// the payload's full name, a valid repository name, on the forge of h's
// kind (Config.Forges) that the payload's URLs name, at the forge's own
// scheme. The payload's URLs only choose among those forges; none of
// them is ever fetched, so that a signed payload cannot point the mirror
// at another host, a private address or a path of its making.
func (s *Server) autoAdded(h hookHost, p forge.Payload, cands []candidate) (candidate, error) {
	if !forge.ValidName(p.Name) {
		return candidate{}, fmt.Errorf("the payload gives no valid repository name (full_name, path_with_namespace)")
	}
	for _, c := range cands {
		host := c.key.Host()
		for _, f := range s.cfg.Forges {
			if string(f.Kind) != h.name || f.Host != host {
				continue
			}
			scheme := "https"
			if f.API != nil && f.API.Scheme == "http" {
				scheme = "http"
			}
			key, fetchURL, err := repokey.Normalize(scheme+"://"+f.Host+"/"+p.Name+".git", s.keyOptions())
			if err != nil {
				return candidate{}, err
			}
			return candidate{key: key, url: fetchURL}, nil
		}
	}
	return candidate{}, fmt.Errorf("its URLs name no %s forge of this mirror (--forge HOST=%s adds one)", h.name, h.name)
}

// knownKey returns the first candidate that is mirrored (on a host that
// folds case, so does the key: a payload's spelling of the path does not
// matter there).
func (s *Server) knownKey(cands []candidate) (repokey.Key, bool) {
	for _, c := range cands {
		if s.fleet.Repos.Known(c.key) {
			return c.key, true
		}
	}
	return "", false
}

// candidate is one repository a payload may name.
type candidate struct {
	key repokey.Key
	url string
}

// candidates returns the repositories that a payload's URLs name, in
// their order, each once: every form of a repository's URL (clone, web,
// SSH) gives the same key. URLs that do not validate are skipped.
func candidates(urls []string, opt repokey.Options) []candidate {
	var out []candidate
	seen := map[repokey.Key]bool{}
	for _, u := range urls {
		key, fetchURL, err := repokey.Normalize(u, opt)
		if err != nil || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, candidate{key: key, url: fetchURL})
	}
	return out
}

// FeedPush takes a forge feed's push of key at pushedAt (the coordinator
// forwards what its feeds see) on the webhook's path: a change hint heard
// before an urgent check of the owner, paced per repository and bounded
// per host as webhooks are, so that the owner's answer is weighed against
// the push.
func (s *Server) FeedPush(ctx context.Context, key repokey.Key, pushedAt time.Time) error {
	_, err := s.requestPaced(key, func() {
		if s.fleet.Hints != nil {
			if err := s.fleet.Hints.ChangeHint(ctx, key, pushedAt); err != nil {
				s.log.Debug("forge feed: change hint not recorded", "key", key, "err", err)
			}
		}
	})
	return err
}
