package alert

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParseReceiver: any --alert string is parsed or refused, never a
// panic, and neither the name used in logs nor an error shows the URL's
// password, path or query.
func FuzzParseReceiver(f *testing.F) {
	for _, s := range []string{
		"https://alerts.example.org/gitfleet?token=SECRETX",
		"https://hooks.slack.com/services/T/B/SECRETX",
		"dingtalk+https://oapi.dingtalk.com/robot/send?access_token=SECRETX&secret=SECRETX",
		"lark+https://open.feishu.cn/open-apis/bot/v2/hook/SECRETX?secret=SECRETX",
		"smtp://ops:SECRETX@mail.example.org:587?from=a@example.org&to=b@example.org",
		"smtps://ops:SECRETX@[::1]?from=a@example.org&to=b@example.org,c@example.org",
		"slack+smtp://x:SECRETX@h/", "teams+https://h/SECRETX", "://SECRETX", "smtp://ops:SECRETX@h?from=SECRETX",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		// What may show: the scheme and host, and the addresses of a mail.
		shown := ""
		if u, err := url.Parse(raw); err == nil {
			shown = u.Scheme + " " + u.Host + " " + u.Query().Get("from") + " " + u.Query().Get("to")
		}
		leaks := func(s string) bool { return strings.Contains(s, "SECRETX") && !strings.Contains(shown, "SECRETX") }
		r, err := parseReceiver(raw)
		if err != nil {
			if leaks(err.Error()) {
				t.Fatalf("%q: the error shows a secret: %v", raw, err)
			}
			return
		}
		if leaks(r.name) {
			t.Fatalf("%q: name %q shows a secret", raw, r.name)
		}
		if r.kind == "" || (r.kind == KindEmail) != (r.mail != nil) || (r.kind != KindEmail) != (r.target != nil) {
			t.Fatalf("%q: %+v", raw, r)
		}
		if r.target != nil && r.target.Query().Has("secret") {
			t.Fatalf("%q: the signing secret would be sent", raw)
		}
	})
}
