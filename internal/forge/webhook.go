package forge

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Auth is how a webhook delivery of a kind proves it comes from the forge.
// The header that carries the credential is the row's TokenHeader.
type Auth int

// The webhook authentication schemes.
const (
	// AuthHMACBody: the header is "sha256=" and the hex HMAC-SHA256 of
	// the raw body under the secret.
	AuthHMACBody Auth = iota + 1
	// AuthPlainToken: the header holds the secret itself.
	AuthPlainToken
	// AuthGiteeToken: the header is the secret, or
	// base64(HMAC-SHA256(secret, timestamp+"\n"+secret)), URL-encoded or
	// not, with the timestamp in milliseconds in TimestampHeader, recent
	// in either form; neither covers the body.
	AuthGiteeToken
)

// A signed timestamp (AuthGiteeToken) is accepted this far in the past
// and in the future.
const (
	timestampMaxAge  = time.Hour
	timestampMaxSkew = 5 * time.Minute
)

// Webhook is what differs between the kinds' webhook deliveries: how one
// is recognised, authenticated, identified and read.
type Webhook struct {
	// Name is the forge as its users know it, and SecretName what its
	// settings call the webhook's secret: errors say "set the webhook's
	// <SecretName> on <Name>".
	Name, SecretName string
	// EventHeader names the event of a delivery.
	EventHeader string
	// RefEvents are the events that mean "refs changed".
	RefEvents []string
	// PingEvent is the event a forge sends to test a hook ("" if none).
	PingEvent string
	// TokenHeader carries the secret or signature; TimestampHeader, if
	// any, the time of the delivery that a signature covers.
	TokenHeader     string
	TimestampHeader string
	Auth            Auth
	// AutoAdd: a delivery is trustworthy enough to add its repository
	// (Gitee's signature covers a timestamp, not the body: no).
	AutoAdd bool
	// DeliveryHeaders identify a delivery, the first present wins; none
	// means the delivery is identified by its content (timestamp, token
	// and body).
	DeliveryHeaders []string
	// ProjectNamesRepo: a payload's "project" object names the repository
	// (on GitHub it is something else); HomepageNamesRepo: so does its
	// "homepage" (on GitHub and Gitee it is a free-form website).
	ProjectNamesRepo  bool
	HomepageNamesRepo bool
}

// SignsBody says whether the credential covers the body, and so is
// checked after reading it.
func (w *Webhook) SignsBody() bool { return w.Auth == AuthHMACBody }

// IsRefEvent says whether event means "refs changed".
func (w *Webhook) IsRefEvent(event string) bool {
	for _, e := range w.RefEvents {
		if e == event {
			return true
		}
	}
	return false
}

// Verify checks the credential of a delivery with headers h against
// secret at now; body is what the credential covers (nil when it does
// not: see SignsBody). Its error says what is wrong and what to do, and
// never quotes the secret.
func (w *Webhook) Verify(h http.Header, secret string, body []byte, now time.Time) error {
	tok := h.Get(w.TokenHeader)
	if tok == "" {
		return fmt.Errorf("missing %s: set the webhook's %s on %s", w.TokenHeader, w.SecretName, w.Name)
	}
	switch w.Auth {
	case AuthHMACBody:
		if !hmac.Equal([]byte(tok), []byte(Sign(secret, body))) {
			return fmt.Errorf("bad %s: the webhook's secret differs from ours", w.TokenHeader)
		}
		return nil
	case AuthPlainToken:
		if !EqualSecret(tok, secret) {
			return fmt.Errorf("wrong %s", w.TokenHeader)
		}
		return nil
	case AuthGiteeToken:
		return w.verifySignedTimestamp(h, tok, secret, now)
	}
	return fmt.Errorf("webhooks from %s: unknown authentication scheme %d", w.Name, w.Auth)
}

// verifySignedTimestamp checks an AuthGiteeToken credential tok. The
// timestamp is required in both forms, so that a captured delivery cannot
// be replayed after timestampMaxAge even with the password.
func (w *Webhook) verifySignedTimestamp(h http.Header, tok, secret string, now time.Time) error {
	ts := h.Get(w.TimestampHeader)
	if ts == "" {
		return fmt.Errorf("missing %s", w.TimestampHeader)
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("bad %s %q: want milliseconds since 1970", w.TimestampHeader, ts)
	}
	switch age := now.Sub(time.UnixMilli(ms)); {
	case age > timestampMaxAge:
		return fmt.Errorf("%s is %v old (at most %v): a replayed delivery?", w.TimestampHeader, age.Round(time.Second), timestampMaxAge)
	case age < -timestampMaxSkew:
		return fmt.Errorf("%s is %v in the future (at most %v)", w.TimestampHeader, (-age).Round(time.Second), timestampMaxSkew)
	}
	if EqualSecret(tok, secret) {
		return nil
	}
	want := GiteeSign(secret, ts)
	if EqualSecret(tok, want) {
		return nil
	}
	if dec, err := url.QueryUnescape(tok); err == nil && EqualSecret(dec, want) {
		return nil
	}
	return fmt.Errorf("wrong %s signature", w.TokenHeader)
}

// GiteeSign is Gitee's signature of a delivery sent at timestamp (ms):
// the AuthGiteeToken credential in its signing form.
func GiteeSign(secret, timestamp string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp + "\n" + secret))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Sign returns "sha256=" and the hex HMAC-SHA256 of body under secret: the
// AuthHMACBody credential (GitHub's X-Hub-Signature-256), and the form of
// the full node's own outgoing webhooks' X-Gitfleet-Signature-256.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// EqualSecret compares two secrets (a webhook's, the API's token) in
// constant time, whatever their lengths.
func EqualSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// DeliveryID returns the identity that a delivery with headers h carries:
// the first of DeliveryHeaders present, or "" when none is (the caller
// then identifies the delivery by its content).
func (w *Webhook) DeliveryID(h http.Header) string {
	for _, name := range w.DeliveryHeaders {
		if v := h.Get(name); v != "" {
			return v
		}
	}
	return ""
}

// OneTimeCredential returns what names the credential of a delivery with
// headers h, when the kind's credential covers a timestamp and not the
// body (Gitee): its timestamp, which a verified delivery's signature
// follows from (a kind has one secret), whichever form carried it. Such a
// credential may be used once: with another body, it is refused. ok is
// false for kinds whose credential covers the body, or is a plain token.
func (w *Webhook) OneTimeCredential(h http.Header) (cred string, ok bool) {
	if w.TimestampHeader == "" || w.SignsBody() {
		return "", false
	}
	return h.Get(w.TimestampHeader), true
}

// Payload is what a delivery says, as sent: untrusted, for the caller to
// check.
type Payload struct {
	// Repos are the URLs that name the repository, most preferred first:
	// fetchable HTTPS forms first (an auto-added repository uses the
	// first), the "url" field last (on GitHub it is sometimes the API
	// URL). Empty fields are left out.
	Repos []string
	// Ref is the full name of the ref that changed ("" when the delivery
	// names none, as a ping does).
	Ref string
	// PushedAt is when the forge says the repository was pushed (zero
	// when it does not say: GitLab's payloads carry no push time).
	PushedAt time.Time
	// Name is the repository's full name on its forge, as sent ("owner/
	// name", GitLab's "group/subgroup/name"; "" when the payload gives
	// none): what an auto-added repository's URL is made of, on the
	// endpoint's own forge, once ValidName says it is a name.
	Name string
}

// Parse reads a delivery's body: JSON, or form-encoded with the JSON in
// its "payload" field (GitHub's "application/x-www-form-urlencoded"
// content type) when contentType says so. Fields of the wrong type are
// taken as absent, so that a field gitfleet does not need cannot make a
// delivery fail; a body that is not a JSON object is an error.
func (w *Webhook) Parse(contentType string, body []byte) (Payload, error) {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return Payload{}, fmt.Errorf("malformed form-encoded payload: %w", err)
		}
		body = []byte(form.Get("payload"))
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return Payload{}, fmt.Errorf("malformed JSON payload: %w", err)
	}
	out := Payload{Ref: fullRef(string(p.Ref), string(p.RefType))}
	var urls []text
	if w.ProjectNamesRepo {
		urls = p.Project.urls(w)
	}
	urls = append(urls, p.Repository.urls(w)...)
	for _, u := range urls {
		if u != "" {
			out.Repos = append(out.Repos, string(u))
		}
	}
	if p.Repository != nil {
		out.PushedAt = time.Time(p.Repository.PushedAt)
	}
	if out.PushedAt.IsZero() && w.ProjectNamesRepo && p.Project != nil {
		out.PushedAt = time.Time(p.Project.PushedAt)
	}
	var names []text
	if w.ProjectNamesRepo {
		names = p.Project.names()
	}
	for _, n := range append(names, p.Repository.names()...) {
		if n != "" {
			out.Name = string(n)
			break
		}
	}
	return out, nil
}

// fullRef is the full name of a payload's ref: as given when it is one;
// GitHub's create and delete events give a short name and its ref_type.
func fullRef(ref, refType string) string {
	switch {
	case strings.HasPrefix(ref, "refs/"):
		return ref
	case ref == "":
		return ""
	case refType == "branch":
		return "refs/heads/" + ref
	case refType == "tag":
		return "refs/tags/" + ref
	}
	return ""
}

type payload struct {
	Ref        text         `json:"ref"`
	RefType    text         `json:"ref_type"`
	Repository *payloadRepo `json:"repository"`
	Project    *payloadRepo `json:"project"`
}

// payloadRepo has the fields of a payload's "repository" or "project"
// object that forges fill with the repository's own URLs, and its push
// time.
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
	// on GitHub and Gitee (see HomepageNamesRepo).
	Homepage text  `json:"homepage"`
	PushedAt stamp `json:"pushed_at"`
	// The repository's full name: GitHub's and Gitee's full_name,
	// GitLab's (and Gitee's) path_with_namespace.
	FullName          text `json:"full_name"`
	PathWithNamespace text `json:"path_with_namespace"`
}

// names lists the full-name fields in order of preference.
func (p *payloadRepo) names() []text {
	if p == nil {
		return nil
	}
	return []text{p.PathWithNamespace, p.FullName}
}

// urls lists the URL fields in order of preference.
func (p *payloadRepo) urls(w *Webhook) []text {
	if p == nil {
		return nil
	}
	u := []text{p.CloneURL, p.GitHTTPURL, p.HTTPURL, p.HTMLURL, p.WebURL, p.SSHURL, p.GitSSHURL, p.GitURL}
	if w.HomepageNamesRepo {
		u = append(u, p.Homepage)
	}
	return append(u, p.URL)
}

// text is a JSON string field that takes other types as empty.
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = text(s)
	}
	return nil
}

// stamp is a time field: seconds since 1970 (GitHub's push events) or
// RFC 3339 (its other events, Gitee); anything else is no time.
type stamp time.Time

func (s *stamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var sec int64
	if json.Unmarshal(b, &sec) == nil {
		*s = stamp(time.Unix(sec, 0).UTC())
		return nil
	}
	var str string
	if json.Unmarshal(b, &str) == nil {
		if t, err := time.Parse(time.RFC3339, str); err == nil {
			*s = stamp(t)
		}
	}
	return nil
}
