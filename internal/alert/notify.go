package alert

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gitfleet/gitfleet/internal/backoff"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/egress"
)

// Options configure a Notifier. Dialer, Clock and Log are required.
type Options struct {
	// Dialer makes every connection to a receiver (the egress policy).
	Dialer *egress.Dialer
	Clock  clock.Clock
	Log    *slog.Logger
	// Console is the address of the web console, put in every message.
	Console string
	// RootCAs verify SMTP servers' certificates (nil: the system's).
	RootCAs *x509.CertPool
	// Attempts bounds the deliveries of one event to one receiver
	// (default 6); the wait between two starts at Backoff (default 1 s)
	// and doubles up to MaxBackoff (default 1 min).
	Attempts            int
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one delivery (default 30 s).
	Timeout time.Duration
}

// queueLen is how many events may wait for one receiver; more are dropped
// (and logged), so that a dead receiver never holds the evaluator.
const queueLen = 256

// Notifier delivers events to the receivers of --alert, each in order,
// each with its own queue, so that a slow receiver delays no other.
type Notifier struct {
	o         Options
	client    *http.Client
	receivers []*receiver
	queues    []chan Event
}

// NewNotifier parses urls (each an --alert URL) and returns a notifier of
// them; Run starts its deliveries.
func NewNotifier(urls []string, o Options) (*Notifier, error) {
	if o.Attempts <= 0 {
		o.Attempts = 6
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	n := &Notifier{o: o, client: &http.Client{
		Timeout:   o.Timeout,
		Transport: &http.Transport{DialContext: o.Dialer.DialContext, Proxy: nil, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 1},
		// A redirect is not followed: it could lead where the policy was
		// never asked. A 3xx is a failed delivery.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	for _, raw := range urls {
		r, err := parseReceiver(raw)
		if err != nil {
			return nil, err
		}
		n.receivers = append(n.receivers, r)
		n.queues = append(n.queues, make(chan Event, queueLen))
	}
	return n, nil
}

// SetConsole sets the console's address put in every message; call it
// before Run.
func (n *Notifier) SetConsole(url string) { n.o.Console = url }

// Receivers names the receivers (their kind, scheme and host), for logs.
func (n *Notifier) Receivers() []string {
	out := make([]string, len(n.receivers))
	for i, r := range n.receivers {
		out[i] = r.name
	}
	return out
}

// CheckPolicy returns, for each receiver that the egress policy refuses by
// its URL alone (scheme, host, port), why: for a warning at start, since
// its deliveries would be dropped. A mail server's address and port are
// checked when it is dialled.
func (n *Notifier) CheckPolicy() []error {
	var errs []error
	for _, r := range n.receivers {
		var err error
		if r.kind == KindEmail {
			err = n.o.Dialer.Policy.CheckHost(r.mail.host)
		} else {
			err = n.o.Dialer.Policy.CheckURL(r.target.String())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
		}
	}
	return errs
}

// Notify queues events for every receiver. It never blocks: an event for
// a receiver whose queue is full is dropped, and logged.
func (n *Notifier) Notify(events ...Event) {
	for i, q := range n.queues {
		for _, e := range events {
			select {
			case q <- e:
			default:
				n.o.Log.Warn("alert: receiver's queue full, event dropped", "receiver", n.receivers[i].name, "alert", e.Key, "status", e.Status)
			}
		}
	}
}

// Run delivers queued events until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	defer n.client.CloseIdleConnections()
	done := make(chan struct{})
	for i := range n.receivers {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case e := <-n.queues[i]:
					n.deliver(ctx, n.receivers[i], e)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for range n.receivers {
		<-done
	}
}

// deliver sends e to r, retrying with backoff up to o.Attempts times.
func (n *Notifier) deliver(ctx context.Context, r *receiver, e Event) {
	b := backoff.New(n.o.Clock, n.o.Backoff, n.o.MaxBackoff)
	err := backoff.Retry(ctx, b, n.o.Attempts, func(ctx context.Context) error {
		err := n.send(ctx, r, e)
		if egress.IsBlocked(err) {
			return backoff.Permanent(err)
		}
		return err
	}, func(attempt int, wait time.Duration, err error) {
		n.o.Log.Info("alert: delivery failed, will retry", "receiver", r.name, "alert", e.Key, "attempt", attempt, "in", wait, "err", err)
	})
	switch {
	case err == nil:
		n.o.Log.Info("alert delivered", "receiver", r.name, "alert", e.Key, "status", e.Status)
	case ctx.Err() != nil:
	case egress.IsBlocked(err):
		n.o.Log.Warn("alert: receiver refused by the egress policy, event dropped (allow it with --egress-allow or --egress-ports)",
			"receiver", r.name, "alert", e.Key, "status", e.Status, "err", err)
	default:
		n.o.Log.Warn("alert: delivery failed, giving up", "receiver", r.name, "alert", e.Key, "status", e.Status,
			"attempts", n.o.Attempts, "err", err)
	}
}

func (n *Notifier) send(ctx context.Context, r *receiver, e Event) error {
	ctx, cancel := context.WithTimeout(ctx, n.o.Timeout)
	defer cancel()
	if r.kind == KindEmail {
		return r.mail.send(ctx, n.o.Dialer, n.o.RootCAs, e, n.o.Console, n.o.Clock.Now())
	}
	target := *r.target
	var body []byte
	var err error
	switch r.kind {
	case KindSlack:
		body, err = slackPayload(e, n.o.Console)
	case KindDingTalk:
		body, err = dingTalkPayload(e, n.o.Console)
		if r.secret != "" {
			ms := n.o.Clock.Now().UnixMilli()
			q := target.Query()
			q.Set("timestamp", strconv.FormatInt(ms, 10))
			q.Set("sign", DingTalkSign(r.secret, ms))
			target.RawQuery = q.Encode()
		}
	case KindLark:
		body, err = larkPayload(e, n.o.Console, r.secret, n.o.Clock.Now())
	default:
		body, err = webhookPayload(e, n.o.Console)
	}
	if err != nil {
		return fmt.Errorf("encode %s message: %w", r.kind, err)
	}
	return n.post(ctx, r, target.String(), body)
}

func (n *Notifier) post(ctx context.Context, r *receiver, target string, body []byte) error {
	if err := n.o.Dialer.Policy.CheckURL(target); err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "gitfleet")
	resp, err := n.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL holds the receiver's token: keep it out of logs
		}
		return fmt.Errorf("%s: %w", r.name, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: answered %s", r.name, resp.Status)
	}
	return appError(r, answer)
}

// appError reads the error that DingTalk and Lark put in a 200 answer:
// {"errcode": N} and {"code": N}, 0 when the message was taken.
func appError(r *receiver, answer []byte) error {
	if r.kind != KindDingTalk && r.kind != KindLark {
		return nil
	}
	var a struct {
		ErrCode *int   `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
		Code    *int   `json:"code"`
		Msg     string `json:"msg"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return nil // not JSON: the 2xx is all there is to go by
	}
	if a.ErrCode != nil && *a.ErrCode != 0 {
		return fmt.Errorf("%s: refused the message: errcode %d: %s", r.name, *a.ErrCode, a.ErrMsg)
	}
	if a.Code != nil && *a.Code != 0 {
		return fmt.Errorf("%s: refused the message: code %d: %s", r.name, *a.Code, a.Msg)
	}
	return nil
}
