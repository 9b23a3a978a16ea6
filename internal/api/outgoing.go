package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gitfleet/gitfleet/internal/backoff"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/forge"
)

// Outgoing webhooks: every batch of events is POSTed to each configured
// URL as {"events": [...]}, retried with exponential backoff.
const (
	hookQueue       = 256 // batches waiting per URL; more are dropped
	hookAttempts    = 6
	hookBackoff     = time.Second // doubled after each failure
	hookMaxBackoff  = time.Minute
	hookPostTimeout = 10 * time.Second
)

// SignatureHeader carries the HMAC-SHA256 of an outgoing webhook's body,
// as "sha256=<hex>", when an outgoing secret is configured.
const SignatureHeader = "X-Gitfleet-Signature-256"

type outgoingBody struct {
	Events []Event `json:"events"`
}

// startOutgoing subscribes to the broker and starts one sender per URL.
func (s *Server) startOutgoing() {
	if len(s.cfg.OutgoingHooks) == 0 {
		return
	}
	client := hookClient(s.egress())
	queues := make([]chan []Event, len(s.cfg.OutgoingHooks))
	for i, url := range s.cfg.OutgoingHooks {
		q := make(chan []Event, hookQueue)
		queues[i] = q
		s.background(func(ctx context.Context) { s.sendHooks(ctx, client, url, q) })
	}
	sub := s.events.Subscribe() // now, so that no event published after New is missed
	s.background(func(ctx context.Context) { s.forwardHooks(ctx, sub, queues) })
}

// forwardHooks copies each batch of events to every URL's queue, never
// blocking; if the broker drops it all the same, it resumes where it was.
func (s *Server) forwardHooks(ctx context.Context, sub *Subscription, queues []chan []Event) {
	last := sub.start
	forward := func(batch []Event) {
		last = batch[len(batch)-1].ID
		for i, q := range queues {
			select {
			case q <- batch:
			default:
				s.log.Warn("outgoing webhook: queue full, events dropped", "url", s.cfg.OutgoingHooks[i], "events", len(batch))
			}
		}
	}
	for {
		select {
		case batch, ok := <-sub.C:
			if ok {
				forward(batch)
				continue
			}
			var replay []Event
			replay, sub = s.events.Resume(last)
			if len(replay) > 0 {
				forward(replay)
			}
		case <-ctx.Done():
			sub.Close()
			return
		}
	}
}

// sendHooks delivers the batches of one URL in order.
func (s *Server) sendHooks(ctx context.Context, client *http.Client, url string, q <-chan []Event) {
	for {
		select {
		case batch := <-q:
			s.deliver(ctx, client, url, batch)
		case <-ctx.Done():
			return
		}
	}
}

func (s *Server) deliver(ctx context.Context, client *http.Client, url string, batch []Event) {
	body, err := json.Marshal(outgoingBody{Events: batch})
	if err != nil {
		s.log.Error("outgoing webhook: encoding events", "err", err)
		return
	}
	err = backoff.Retry(ctx, backoff.New(s.clk, hookBackoff, hookMaxBackoff), hookAttempts, func(ctx context.Context) error {
		err := s.post(ctx, client, url, body)
		if egress.IsBlocked(err) {
			return backoff.Permanent(err)
		}
		return err
	}, func(attempt int, wait time.Duration, err error) {
		s.log.Info("outgoing webhook: will retry", "url", url, "attempt", attempt, "in", wait, "err", err)
	})
	switch {
	case err == nil:
		s.log.Debug("outgoing webhook: delivered", "url", url, "events", len(batch))
	case ctx.Err() != nil:
	case egress.IsBlocked(err):
		s.log.Warn("outgoing webhook: destination refused, events dropped", "url", url, "events", len(batch), "err", err)
	default:
		s.log.Warn("outgoing webhook: giving up, events dropped", "url", url, "attempts", hookAttempts,
			"events", len(batch), "first_event", batch[0].ID, "err", err)
	}
}

func (s *Server) post(ctx context.Context, client *http.Client, url string, body []byte) error {
	if err := s.egress().Policy.CheckURL(url); err != nil {
		return fmt.Errorf("outgoing webhook: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("outgoing webhook %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gitfleet")
	if s.cfg.OutgoingSecret != "" {
		req.Header.Set(SignatureHeader, forge.Sign(s.cfg.OutgoingSecret, body))
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("outgoing webhook %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("outgoing webhook %s: answered %s", url, resp.Status)
	}
	return nil
}
