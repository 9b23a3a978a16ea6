package alert

import (
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strings"
)

// The kinds of receiver, as --alert URLs name them.
const (
	KindWebhook  = "webhook"
	KindSlack    = "slack"
	KindDingTalk = "dingtalk"
	KindLark     = "lark"
	KindEmail    = "email"
)

// receiver is one --alert URL, parsed.
type receiver struct {
	kind string
	// name is the URL for logs: its kind, scheme and host, never its path
	// or query (a Slack or DingTalk URL's token is its secret).
	name string
	// target is where an HTTP receiver is posted to (the kind's prefix
	// and the secret parameter removed).
	target *url.URL
	// secret signs DingTalk and Lark messages.
	secret string
	mail   *mailTarget
}

// mailTarget is an smtp:// or smtps:// URL.
type mailTarget struct {
	host, port  string
	implicitTLS bool
	user, pass  string
	from        string
	to          []string
}

// prefixes name a kind explicitly: slack+https://...
var prefixes = map[string]string{"slack": KindSlack, "dingtalk": KindDingTalk, "lark": KindLark, "feishu": KindLark}

// parseReceiver reads an --alert URL. The kind is told by the URL: an
// explicit prefix (slack+, dingtalk+, lark+ or feishu+), smtp:// or
// smtps://, the host of a known service, or else a generic JSON webhook.
func parseReceiver(raw string) (*receiver, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("alert URL %q: want http(s)://host/..., slack+https://..., dingtalk+https://..., lark+https://... or smtp(s)://host", redact(raw))
	}
	scheme := strings.ToLower(u.Scheme)
	kind := ""
	if p, rest, ok := strings.Cut(scheme, "+"); ok {
		if kind = prefixes[p]; kind == "" {
			return nil, fmt.Errorf("alert URL %q: unknown kind %q (slack, dingtalk, lark or feishu)", redact(raw), p)
		}
		scheme = rest
	}
	r := &receiver{kind: kind}
	switch scheme {
	case "smtp", "smtps":
		if kind != "" {
			return nil, fmt.Errorf("alert URL %q: %s+ needs http or https", redact(raw), kind)
		}
		r.kind = KindEmail
		if r.mail, err = parseMail(u, scheme == "smtps"); err != nil {
			return nil, fmt.Errorf("alert URL %q: %w", redact(raw), err)
		}
		r.name = scheme + "://" + u.Host
		return r, nil
	case "http", "https":
	default:
		return nil, fmt.Errorf("alert URL %q: scheme %q: want http, https, smtp or smtps", redact(raw), scheme)
	}
	t := *u
	t.Scheme = scheme
	host := strings.ToLower(u.Hostname())
	if r.kind == "" {
		switch {
		case host == "hooks.slack.com":
			r.kind = KindSlack
		case host == "oapi.dingtalk.com" && strings.HasPrefix(u.Path, "/robot/send"):
			r.kind = KindDingTalk
		case (host == "open.feishu.cn" || host == "open.larksuite.com") && strings.HasPrefix(u.Path, "/open-apis/bot/"):
			r.kind = KindLark
		default:
			r.kind = KindWebhook
		}
	}
	if r.kind == KindDingTalk || r.kind == KindLark {
		q := t.Query()
		r.secret = q.Get("secret")
		q.Del("secret") // never sent: it only signs
		t.RawQuery = q.Encode()
	}
	r.target = &t
	r.name = r.kind + " " + scheme + "://" + u.Host
	return r, nil
}

// parseMail reads smtp://user:pass@host:port?from=a@x&to=b@y,c@z.
func parseMail(u *url.URL, implicitTLS bool) (*mailTarget, error) {
	m := &mailTarget{host: u.Hostname(), port: u.Port(), implicitTLS: implicitTLS}
	if m.port == "" {
		m.port = "587" // submission, with STARTTLS
		if implicitTLS {
			m.port = "465"
		}
	}
	if u.User != nil {
		m.user = u.User.Username()
		m.pass, _ = u.User.Password()
	}
	q := u.Query()
	from, err := mail.ParseAddress(q.Get("from"))
	if err != nil {
		return nil, fmt.Errorf("from=%q: want an email address: %w", q.Get("from"), err)
	}
	m.from = from.Address
	for _, t := range strings.Split(q.Get("to"), ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		a, err := mail.ParseAddress(t)
		if err != nil {
			return nil, fmt.Errorf("to=%q: want email addresses separated by commas: %w", t, err)
		}
		m.to = append(m.to, a.Address)
	}
	if len(m.to) == 0 {
		return nil, fmt.Errorf("no recipient: add to=a@example.org (several separated by commas)")
	}
	if m.host == "" || net.ParseIP(m.host) == nil && strings.ContainsAny(m.host, " /\\") {
		return nil, fmt.Errorf("bad host %q", m.host)
	}
	return m, nil
}

// redact is raw without what may be secret: the user's password, the path
// and the query.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(not a URL)"
	}
	return u.Scheme + "://" + u.Host + "/..."
}
