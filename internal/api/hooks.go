package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Gitee's signed timestamps are accepted this far in the past and future.
const (
	giteeMaxAge  = time.Hour
	giteeMaxSkew = 5 * time.Minute
)

// hookHost is a kind of forge whose webhooks the full node takes: what
// its deliveries look like comes from forge's table, how to check their
// credential from verifiers.
type hookHost struct {
	name   string // the kind, and the path under /hooks/
	hook   *forge.Webhook
	verify func(s *Server, r *http.Request, secret string, body []byte) error
}

// verifiers check a delivery's credential, by the table's scheme.
var verifiers = map[forge.Auth]func(*Server, *http.Request, string, []byte) error{
	forge.AuthHMACBody:   verifyGitHub,
	forge.AuthPlainToken: verifyGitLab,
	forge.AuthGiteeToken: verifyGitee,
}

// hosts are the kinds of forge that have a webhook, in the table's order.
var hosts = func() []hookHost {
	var out []hookHost
	for _, k := range forge.Kinds() {
		if w := forge.WebhookOf(k); w != nil {
			out = append(out, hookHost{name: string(k), hook: w, verify: verifiers[w.Auth]})
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
			if err := h.verify(s, r, secret, nil); err != nil {
				writeError(w, http.StatusUnauthorized, err.Error())
				return
			}
		}
		body, ok := readBody(w, r, s.maxBody(defaultMaxHookBody))
		if !ok {
			return
		}
		if h.hook.SignsBody() {
			if err := h.verify(s, r, secret, body); err != nil {
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
		payload, err := formPayload(r, body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		cands, err := payloadRepos(h.name, payload, s.keyOptions())
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
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
			writeJSON(w, http.StatusOK, hookResponse{Key: cands[0].key, Ignored: "this delivery was already acted on"})
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
				hinter, ok := s.b.(ChangeHinter)
				if !ok {
					return
				}
				// Heard before the check starts, so that the owner's answer
				// is weighed against it; and only for a check that was let in.
				if err := hinter.ChangeHint(r.Context(), key, s.clk.Now()); err != nil {
					s.log.Warn("webhook: change hint not recorded", "host", h.name, "key", key, "err", err)
				}
			})
			if err != nil {
				s.delivered.forget(c) // the host's retry is acted on
				writeHostBusy(w, err)
				return
			}
			pt := publicTask(t)
			writeJSON(w, http.StatusAccepted, hookResponse{Key: key, Task: &pt})
			return
		}
		first := cands[0]
		if s.cfg.AutoAdd && h.hook.AutoAdd {
			if err := s.admitHost(first.key, s.clk.Now()); err != nil {
				s.delivered.forget(c)
				writeHostBusy(w, err)
				return
			}
			s.background(func(ctx context.Context) {
				ctx, cancel := context.WithTimeout(ctx, startTimeout)
				defer cancel()
				if _, err := s.b.AddRepo(ctx, first.url, nil, false); err != nil {
					s.log.Warn("webhook: cannot auto-add a repository", "host", h.name, "key", first.key, "err", err)
					return
				}
				s.log.Info("webhook: repository auto-added", "host", h.name, "key", first.key)
			})
			writeJSON(w, http.StatusAccepted, hookResponse{Key: first.key, Added: true})
			return
		}
		msg := fmt.Sprintf("repository %s is not mirrored", first.key)
		if s.cfg.AutoAdd {
			msg += " (not auto-added from " + h.name + ": its signature does not cover the payload)"
		}
		writeJSON(w, http.StatusOK, hookResponse{Key: first.key, Ignored: msg})
	}
}

// knownKey returns the first candidate that is mirrored (on a host that
// folds case, so does the key: a payload's spelling of the path does not
// matter there).
func (s *Server) knownKey(cands []candidate) (string, bool) {
	for _, c := range cands {
		if s.b.Known(c.key) {
			return c.key, true
		}
	}
	return "", false
}

// formPayload returns the JSON of a delivery: the body itself, or its
// "payload" field when GitHub sends it form-encoded.
func formPayload(r *http.Request, body []byte) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("malformed form-encoded payload: %w", err)
	}
	return []byte(form.Get("payload")), nil
}

func verifyGitHub(_ *Server, r *http.Request, secret string, body []byte) error {
	sig := r.Header.Get("X-Hub-Signature-256")
	if sig == "" {
		return errors.New("missing X-Hub-Signature-256: set the webhook's secret on GitHub")
	}
	if !hmac.Equal([]byte(sig), []byte(Sign(secret, body))) {
		return errors.New("bad X-Hub-Signature-256: the webhook's secret differs from ours")
	}
	return nil
}

func verifyGitLab(_ *Server, r *http.Request, secret string, _ []byte) error {
	tok := r.Header.Get("X-Gitlab-Token")
	if tok == "" {
		return errors.New("missing X-Gitlab-Token: set the webhook's secret token on GitLab")
	}
	if !equalSecret(tok, secret) {
		return errors.New("wrong X-Gitlab-Token")
	}
	return nil
}

// verifyGitee accepts X-Gitee-Token as the plain secret (password mode)
// or as base64(HMAC-SHA256(secret, timestamp+"\n"+secret)), URL-encoded or
// not (signing mode), with a recent X-Gitee-Timestamp in milliseconds in
// either mode.
func verifyGitee(s *Server, r *http.Request, secret string, _ []byte) error {
	tok := r.Header.Get("X-Gitee-Token")
	if tok == "" {
		return errors.New("missing X-Gitee-Token: set the webhook's password or signing key on Gitee")
	}
	// The timestamp is required in both modes, so that a captured
	// delivery cannot be replayed after giteeMaxAge even with a password.
	ts := r.Header.Get("X-Gitee-Timestamp")
	if ts == "" {
		return errors.New("missing X-Gitee-Timestamp")
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("bad X-Gitee-Timestamp %q: want milliseconds since 1970", ts)
	}
	switch age := s.clk.Now().Sub(time.UnixMilli(ms)); {
	case age > giteeMaxAge:
		return fmt.Errorf("X-Gitee-Timestamp is %v old (at most %v): a replayed delivery?", age.Round(time.Second), giteeMaxAge)
	case age < -giteeMaxSkew:
		return fmt.Errorf("X-Gitee-Timestamp is %v in the future (at most %v)", (-age).Round(time.Second), giteeMaxSkew)
	}
	if equalSecret(tok, secret) {
		return nil
	}
	want := GiteeSign(secret, ts)
	if equalSecret(tok, want) {
		return nil
	}
	if dec, err := url.QueryUnescape(tok); err == nil && equalSecret(dec, want) {
		return nil
	}
	return errors.New("wrong X-Gitee-Token signature")
}

// GiteeSign is Gitee's signature of a delivery sent at timestamp (ms).
func GiteeSign(secret, timestamp string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp + "\n" + secret))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// candidate is one repository a payload may name.
type candidate struct{ key, url string }

// text is a JSON string field that tolerates other types (as empty), so
// that a field we do not need cannot make a delivery fail.
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = text(s)
	}
	return nil
}

// payloadRepo has the URL fields of a payload's "repository" or
// "project" object that hosts fill with the repository's own URLs.
type payloadRepo struct {
	CloneURL   text `json:"clone_url"`
	GitHTTPURL text `json:"git_http_url"`
	HTTPURL    text `json:"http_url"`
	HTMLURL    text `json:"html_url"`
	WebURL     text `json:"web_url"`
	SSHURL     text `json:"ssh_url"`
	GitSSHURL  text `json:"git_ssh_url"`
	GitURL     text `json:"git_url"`
	URL        text `json:"url"`
	// Homepage is the project's page on GitLab, but a free-form website
	// on GitHub and Gitee: only GitLab's is used.
	Homepage text `json:"homepage"`
}

// urls lists the fields in order of preference: fetchable HTTPS forms
// first (an auto-added repository uses the first), "url" last (on GitHub
// it is sometimes the API URL).
func (p *payloadRepo) urls(hook *forge.Webhook) []text {
	if p == nil {
		return nil
	}
	u := []text{p.CloneURL, p.GitHTTPURL, p.HTTPURL, p.HTMLURL, p.WebURL, p.SSHURL, p.GitSSHURL, p.GitURL}
	if hook.HomepageNamesRepo {
		u = append(u, p.Homepage)
	}
	return append(u, p.URL)
}

type payload struct {
	Repository *payloadRepo `json:"repository"`
	Project    *payloadRepo `json:"project"`
}

// payloadRepos returns the repositories a delivery names, most preferred
// first, each once. Every form of the repository's URL (clone, web, SSH)
// gives the same key; URLs that do not validate are skipped.
func payloadRepos(host string, body []byte, opt repokey.Options) ([]candidate, error) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("malformed JSON payload: %w", err)
	}
	hook := forge.WebhookOf(forge.Kind(host))
	if hook == nil {
		return nil, fmt.Errorf("no webhooks from %q", host)
	}
	urls := p.Repository.urls(hook)
	if hook.ProjectNamesRepo {
		urls = append(p.Project.urls(hook), urls...)
	}
	var out []candidate
	seen := map[string]bool{}
	for _, u := range urls {
		if u == "" {
			continue
		}
		key, fetchURL, err := repokey.Normalize(string(u), opt)
		if err != nil || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, candidate{key: key, url: fetchURL})
	}
	return out, nil
}

// FeedPush takes a forge feed's push of key at pushedAt (the coordinator
// forwards what its feeds see) on the webhook's path: a change hint heard
// before an urgent check of the owner, paced per repository and bounded
// per host as webhooks are, so that the owner's answer is weighed against
// the push.
func (s *Server) FeedPush(ctx context.Context, key string, pushedAt time.Time) error {
	_, err := s.requestPaced(key, func() {
		if hinter, ok := s.b.(ChangeHinter); ok {
			if err := hinter.ChangeHint(ctx, key, pushedAt); err != nil {
				s.log.Debug("forge feed: change hint not recorded", "key", key, "err", err)
			}
		}
	})
	return err
}
