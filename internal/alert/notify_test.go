package alert

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/alert/alerttest"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/egress"
)

// logBuffer is a log that tests can read while the notifier writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startNotifier runs a notifier of urls until the test ends.
func startNotifier(t *testing.T, urls []string, o Options) (*Notifier, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	if o.Dialer == nil {
		o.Dialer = &egress.Dialer{Policy: egress.Default(true)} // receivers on 127.0.0.1
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	o.Log = slog.New(slog.NewTextHandler(logs, nil))
	if o.Backoff == 0 {
		o.Backoff = 10 * time.Millisecond
	}
	n, err := NewNotifier(urls, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return n, logs
}

// waitFor polls cond for up to a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// delivered counts the events that the notifier logged as delivered to
// the receiver named name.
func delivered(logs *logBuffer, name string) int {
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="alert delivered"`) &&
			(strings.Contains(line, " receiver="+strconv.Quote(name)+" ") || strings.Contains(line, " receiver="+name+" ")) {
			n++
		}
	}
	return n
}

func sampleEvents() (firing, resolved Event) {
	a := Alert{Key: "node-gone/3", Rule: RuleNodeGone, Summary: "node 3 (lab <!channel>) is gone: silent past its grace",
		Figure: "last heartbeat 2026-11-25T11:49:00Z", Threshold: "grace 10m0s", Since: t0}
	return Event{Alert: a, Status: Firing, At: t0}, Event{Alert: a, Status: Resolved, At: t0.Add(20 * time.Minute)}
}

// TestEachKindOfReceiverGetsTheAlertOnceAndItsResolutionOnce sends a
// firing and its resolution to a real receiver of each kind on 127.0.0.1
// and parses what each got, in the receiver's own format.
func TestEachKindOfReceiverGetsTheAlertOnceAndItsResolutionOnce(t *testing.T) {
	webhook := alerttest.StartHTTP(t, nil)
	slack := alerttest.StartHTTP(t, func(int) (int, string) { return http.StatusOK, "ok" })
	ding := alerttest.StartHTTP(t, func(int) (int, string) { return http.StatusOK, `{"errcode":0,"errmsg":"ok"}` })
	lark := alerttest.StartHTTP(t, func(int) (int, string) { return http.StatusOK, `{"code":0,"msg":"success"}` })
	mail := alerttest.StartSMTP(t, alerttest.SMTPOptions{Users: map[string]string{"ops": "s3cret"}})
	const console = "http://mirror.example.org/-/"
	urls := []string{
		webhook.URL + "/hook",
		"slack+" + slack.URL + "/services/T0/B0/XYZ",
		"dingtalk+" + ding.URL + "/robot/send?access_token=tok&secret=SECdingsecret",
		"lark+" + lark.URL + "/open-apis/bot/v2/hook/abc?secret=larksecret",
		"smtp://ops:s3cret@" + mail.Addr + "?from=gitfleet@example.org&to=a@example.org,b@example.org",
	}
	clk := clock.NewFake(t0.Add(20 * time.Minute))
	n, logs := startNotifier(t, urls, Options{Clock: clk, Console: console})
	fired, resolved := sampleEvents()
	n.Notify(fired)
	n.Notify(resolved)
	// Once a receiver's two events are delivered, its queue is empty and
	// nothing is left to retry: what it got is all it gets.
	for _, name := range n.Receivers() {
		waitFor(t, "two deliveries to "+name, func() bool { return delivered(logs, name) == 2 })
	}
	check := func(kind string, n int) {
		if n != 2 {
			t.Errorf("%s got %d messages, want the firing and the resolution once each", kind, n)
		}
	}

	// The generic webhook: the event as JSON.
	reqs := webhook.Requests()
	check("webhook", len(reqs))
	for i, want := range []Event{fired, resolved} {
		var b WebhookBody
		if err := json.Unmarshal(reqs[i].Body, &b); err != nil {
			t.Fatalf("webhook body %s: %v", reqs[i].Body, err)
		}
		if b.Status != want.Status || b.Key != want.Key || b.Figure != want.Figure || b.Threshold != want.Threshold ||
			!b.Since.Equal(t0) || b.Console != console || b.ID != want.ID() || !strings.Contains(b.Text, b.Summary) {
			t.Errorf("webhook message %d: %+v", i, b)
		}
	}
	if fired.ID() == resolved.ID() {
		t.Error("a firing and its resolution have one ID")
	}

	// Slack: text, with the node's name unable to mention a channel.
	reqs = slack.Requests()
	check("slack", len(reqs))
	for i, st := range []string{"[FIRING]", "[RESOLVED]"} {
		var b struct{ Text string }
		if err := json.Unmarshal(reqs[i].Body, &b); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b.Text, st) || !strings.Contains(b.Text, "lab &lt;!channel&gt;") || !strings.Contains(b.Text, console) ||
			!strings.Contains(b.Text, "grace 10m0s") || reqs[i].Path != "/services/T0/B0/XYZ" {
			t.Errorf("slack message %d at %s: %q", i, reqs[i].Path, b.Text)
		}
	}

	// DingTalk: msgtype text, signed in the URL, the secret never sent.
	reqs = ding.Requests()
	check("dingtalk", len(reqs))
	for i, st := range []string{"[FIRING]", "[RESOLVED]"} {
		var b struct {
			MsgType string `json:"msgtype"`
			Text    struct{ Content string }
		}
		if err := json.Unmarshal(reqs[i].Body, &b); err != nil {
			t.Fatal(err)
		}
		q, _ := url.ParseQuery(reqs[i].Query)
		ms, _ := strconv.ParseInt(q.Get("timestamp"), 10, 64)
		if b.MsgType != "text" || !strings.HasPrefix(b.Text.Content, st) || q.Get("access_token") != "tok" || q.Has("secret") ||
			ms != clk.Now().UnixMilli() || q.Get("sign") != DingTalkSign("SECdingsecret", ms) {
			t.Errorf("dingtalk message %d: %s?%s", i, reqs[i].Body, reqs[i].Query)
		}
	}

	// Lark: msg_type text, signed in the body.
	reqs = lark.Requests()
	check("lark", len(reqs))
	for i, st := range []string{"[FIRING]", "[RESOLVED]"} {
		var b struct {
			MsgType   string `json:"msg_type"`
			Timestamp string
			Sign      string
			Content   struct{ Text string }
		}
		if err := json.Unmarshal(reqs[i].Body, &b); err != nil {
			t.Fatal(err)
		}
		sec, _ := strconv.ParseInt(b.Timestamp, 10, 64)
		if b.MsgType != "text" || !strings.HasPrefix(b.Content.Text, st) || sec != clk.Now().Unix() ||
			b.Sign != LarkSign("larksecret", sec) || reqs[i].Query != "" {
			t.Errorf("lark message %d: %s?%s", i, reqs[i].Body, reqs[i].Query)
		}
	}

	// Email: authenticated, to both recipients, subject and body.
	mails := mail.Mails()
	check("smtp", len(mails))
	for i, st := range []string{"[FIRING]", "[RESOLVED]"} {
		m := mails[i]
		if m.User != "ops" || m.From != "gitfleet@example.org" || strings.Join(m.To, ",") != "a@example.org,b@example.org" ||
			!strings.Contains(m.Data, "Subject: "+st+" gitfleet node-gone:") || !strings.Contains(m.Data, "\r\n\r\n"+st) ||
			!strings.Contains(m.Data, "Console: "+console) {
			t.Errorf("mail %d from %s to %v as %q:\n%s", i, m.From, m.To, m.User, m.Data)
		}
	}
}

// TestSMTPOverTLS delivers over STARTTLS and over implicit TLS (smtps),
// the server's certificate verified against the test's own root.
func TestSMTPOverTLS(t *testing.T) {
	serverTLS, roots := testCert(t)
	starttls := alerttest.StartSMTP(t, alerttest.SMTPOptions{TLS: serverTLS, Users: map[string]string{"ops": "pw"}})
	implicit := alerttest.StartSMTP(t, alerttest.SMTPOptions{TLS: serverTLS, Implicit: true})
	n, logs := startNotifier(t, []string{
		"smtp://ops:pw@" + starttls.Addr + "?from=g@example.org&to=a@example.org",
		"smtps://" + implicit.Addr + "?from=g@example.org&to=a@example.org",
	}, Options{RootCAs: roots})
	fired, _ := sampleEvents()
	n.Notify(fired)
	waitFor(t, "a mail at each server", func() bool { return len(starttls.Mails()) == 1 && len(implicit.Mails()) == 1 })
	if m := starttls.Mails()[0]; !m.TLS || m.User != "ops" {
		t.Errorf("STARTTLS: tls %v user %q\n%s", m.TLS, m.User, logs)
	}
	if m := implicit.Mails()[0]; !m.TLS {
		t.Errorf("smtps: not over TLS")
	}
}

// testCert returns a server TLS configuration for 127.0.0.1 and the pool
// that verifies it.
func testCert(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "alerttest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, roots
}

func TestAFailedDeliveryIsRetriedThenGivenUp(t *testing.T) {
	flaky := alerttest.StartHTTP(t, func(n int) (int, string) {
		if n < 2 {
			return http.StatusBadGateway, ""
		}
		return http.StatusOK, ""
	})
	// DingTalk answers 200 with an error code when it refuses a message.
	refusing := alerttest.StartHTTP(t, func(int) (int, string) { return http.StatusOK, `{"errcode":310000,"errmsg":"sign not match"}` })
	n, logs := startNotifier(t, []string{flaky.URL, "dingtalk+" + refusing.URL + "/robot/send?access_token=x"}, Options{Attempts: 4})
	fired, _ := sampleEvents()
	n.Notify(fired)
	waitFor(t, "the flaky receiver's third request", func() bool { return len(flaky.Requests()) >= 3 })
	waitFor(t, "giving up on the refusing receiver", func() bool { return strings.Contains(logs.String(), "giving up") })
	if got := len(refusing.Requests()); got != 4 {
		t.Errorf("refusing receiver got %d requests, want the 4 attempts", got)
	}
	if !strings.Contains(logs.String(), "errcode 310000") {
		t.Errorf("the refusal is not logged:\n%s", logs)
	}
	// Delivered, the event is not sent again.
	waitFor(t, "the delivery to the flaky receiver", func() bool { return delivered(logs, n.Receivers()[0]) == 1 })
	if got := len(flaky.Requests()); got != 3 {
		t.Errorf("flaky receiver got %d requests, want 2 failures and 1 success", got)
	}
}

func TestReceiversRefusedByTheEgressPolicyOrRedirectingGetNothing(t *testing.T) {
	target := alerttest.StartHTTP(t, nil)
	redirect := alerttest.StartHTTP(t, func(int) (int, string) { return http.StatusFound, "" })
	mail := alerttest.StartSMTP(t, alerttest.SMTPOptions{})
	// The strict policy: 127.0.0.1 is refused for the webhook and the mail server.
	n, logs := startNotifier(t, []string{target.URL, "smtp://" + mail.Addr + "?from=g@example.org&to=a@example.org"},
		Options{Dialer: &egress.Dialer{Policy: egress.Default(false)}})
	fired, _ := sampleEvents()
	n.Notify(fired)
	waitFor(t, "two refusals logged", func() bool { return strings.Count(logs.String(), "refused by the egress policy") == 2 })
	if len(target.Requests()) != 0 || len(mail.Mails()) != 0 {
		t.Fatalf("a refused receiver got a message")
	}
	// A redirect is a failed delivery, not followed.
	n2, logs2 := startNotifier(t, []string{redirect.URL}, Options{Attempts: 2})
	n2.Notify(fired)
	waitFor(t, "giving up on the redirect", func() bool { return strings.Contains(logs2.String(), "giving up") })
	if !strings.Contains(logs2.String(), "302 Found") || len(redirect.Requests()) != 2 {
		t.Fatalf("%d requests:\n%s", len(redirect.Requests()), logs2)
	}
}

func TestNotifyNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	slow := alerttest.StartHTTP(t, func(int) (int, string) { <-hang; return http.StatusOK, "" })
	n, logs := startNotifier(t, []string{slow.URL}, Options{})
	fired, _ := sampleEvents()
	for range 2 * queueLen { // a stuck receiver: the queue fills, Notify drops and returns
		n.Notify(fired)
	}
	if !strings.Contains(logs.String(), "queue full") {
		t.Fatal("no event dropped")
	}
}

func TestParseReceiver(t *testing.T) {
	for _, tc := range []struct{ url, kind, target, name string }{
		{"https://alerts.example.org/gitfleet", KindWebhook, "https://alerts.example.org/gitfleet", "webhook https://alerts.example.org"},
		{"https://hooks.slack.com/services/T/B/X", KindSlack, "https://hooks.slack.com/services/T/B/X", "slack https://hooks.slack.com"},
		{"slack+http://chat.corp.example/hooks/x", KindSlack, "http://chat.corp.example/hooks/x", "slack http://chat.corp.example"},
		{"https://oapi.dingtalk.com/robot/send?access_token=T&secret=S", KindDingTalk, "https://oapi.dingtalk.com/robot/send?access_token=T", "dingtalk https://oapi.dingtalk.com"},
		{"https://oapi.dingtalk.com/other", KindWebhook, "https://oapi.dingtalk.com/other", "webhook https://oapi.dingtalk.com"},
		{"https://open.feishu.cn/open-apis/bot/v2/hook/H?secret=S", KindLark, "https://open.feishu.cn/open-apis/bot/v2/hook/H", "lark https://open.feishu.cn"},
		{"https://open.larksuite.com/open-apis/bot/v2/hook/H", KindLark, "https://open.larksuite.com/open-apis/bot/v2/hook/H", "lark https://open.larksuite.com"},
		{"feishu+https://relay.example/x", KindLark, "https://relay.example/x", "lark https://relay.example"},
		{"smtp://u:p@mail.example.org?from=a@x.org&to=b@y.org", KindEmail, "", "smtp://mail.example.org"},
	} {
		r, err := parseReceiver(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		target := ""
		if r.target != nil {
			target = r.target.String()
		}
		if r.kind != tc.kind || target != tc.target || r.name != tc.name {
			t.Errorf("%s: kind %s target %s name %q, want %s %s %q", tc.url, r.kind, target, r.name, tc.kind, tc.target, tc.name)
		}
	}
	m, err := parseReceiver("smtps://u:p%40ss@mail.example.org?from=Ops+<ops@x.org>&to=a@x.org,+b@y.org")
	if err != nil {
		t.Fatal(err)
	}
	if mt := m.mail; mt.port != "465" || !mt.implicitTLS || mt.user != "u" || mt.pass != "p@ss" || mt.from != "ops@x.org" ||
		fmt.Sprint(mt.to) != "[a@x.org b@y.org]" {
		t.Errorf("smtps: %+v", *mt)
	}
	for _, bad := range []string{"", "not a url", "ftp://x.example/y", "teams+https://x.example/y", "slack+smtp://x.example",
		"smtp://mail.example.org?to=a@x.org", "smtp://mail.example.org?from=a@x.org", "smtp://mail.example.org?from=a@x.org&to=nobody"} {
		if _, err := parseReceiver(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		} else if strings.Contains(err.Error(), "p@ss") {
			t.Errorf("%q: the error shows a secret: %v", bad, err)
		}
	}
}

func TestMailHeadersCannotBeInjected(t *testing.T) {
	fired, _ := sampleEvents()
	fired.Summary = "node 3 (evil\r\nBcc: victim@example.org) is gone"
	msg := string(mailMessage("g@example.org", []string{"a@example.org"}, fired, "", t0))
	head, _, _ := strings.Cut(msg, "\n\n")
	for _, line := range strings.Split(head, "\n") {
		if strings.HasPrefix(strings.ToLower(line), "bcc:") {
			t.Fatalf("injected header:\n%s", head)
		}
	}
}

// Repositories short of healthy replicas reach a webhook receiver (a real
// HTTP server) once when the rule fires after its hold, with their count,
// and once when they are healthy again.
func TestUnderReplicatedRepositoriesReachAWebhookOnceFiredAndOnceResolved(t *testing.T) {
	webhook := alerttest.StartHTTP(t, nil)
	clk := clock.NewFake(t0)
	n, logs := startNotifier(t, []string{webhook.URL + "/hook"}, Options{Clock: clk})
	e := NewEvaluator(Rules(DefaultThresholds()))
	snap := &Snapshot{Session: Session{Connected: true}, Catalog: &Catalog{UnderReplicated: 7}}
	for _, at := range []time.Duration{0, time.Minute, 5 * time.Minute} {
		n.Notify(e.Evaluate(snap, t0.Add(at))...)
	}
	snap.Catalog = &Catalog{}
	n.Notify(e.Evaluate(snap, t0.Add(6*time.Minute))...)
	waitFor(t, "two deliveries", func() bool { return delivered(logs, n.Receivers()[0]) == 2 })
	reqs := webhook.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the receiver got %d messages, want the firing and the resolution", len(reqs))
	}
	for i, want := range []Status{Firing, Resolved} {
		var b WebhookBody
		if err := json.Unmarshal(reqs[i].Body, &b); err != nil {
			t.Fatalf("webhook body %s: %v", reqs[i].Body, err)
		}
		if b.Rule != RuleUnderReplicated || b.Status != want || b.Figure != "7 repositories" ||
			!strings.Contains(b.Summary, "fewer healthy replicas than --full-replicas") {
			t.Errorf("message %d: %+v, want the under-replicated alert %s with its 7 repositories", i, b, want)
		}
	}
}
